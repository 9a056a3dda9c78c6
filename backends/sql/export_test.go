package sql

import "time"

// SetWallClock sets the application wall clock the Backend made from c
// uses for informational fields (Identity.Started, Claim.Started when
// zero). Tests skew it to show that no expiry decision reads it.
func SetWallClock(c *Config, now func() time.Time) { c.wallNow = now }

// SetJSONTable tells b whether its MySQL server has JSON_TABLE, so that
// tests can run the ledger's other form (UNION ALL rows, for MariaDB
// 10.5) on a server that has it.
func SetJSONTable(b *Backend, has bool) {
	if has {
		b.jsonTable.Store(jsonTableYes)
	} else {
		b.jsonTable.Store(jsonTableNo)
	}
}
