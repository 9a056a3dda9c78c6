package sql

import "time"

// SetWallClock sets the application wall clock the Backend made from c
// uses for informational fields (Identity.Started, Claim.Started when
// zero). Tests skew it to show that no expiry decision reads it.
func SetWallClock(c *Config, now func() time.Time) { c.wallNow = now }
