package sql

import "time"

// SetWallClock sets the application wall clock the Backend made from c
// uses for informational fields (Identity.Started, Claim.Started when
// zero). Tests skew it to show that no expiry decision reads it.
func SetWallClock(c *Config, now func() time.Time) { c.wallNow = now }

// SetJSONTable tells b whether its MySQL server has JSON_TABLE, so that
// tests can run the ledger's other form (UNION ALL rows, for MariaDB
// 10.5) on a server that has it.
func SetJSONTable(b *Backend, has bool) { b.jsonTable.set(has) }

// SetClaimStep makes b's MySQL claim transactions call step, on the
// claim's goroutine while the transaction is open, after each statement
// that another statement or the commit follows, with its number (1, lease
// row share-locked; 2, tick rows locked; 3, new tick rows inserted; 4,
// tick rows moved; 5, runs inserted; 6, runs beyond History read). Set it
// before b's first claim.
func SetClaimStep(b *Backend, step func(done int)) { b.claimStep = step }

// SetControlStep makes b's fenced control puts call step, on the put's
// goroutine while its transaction is open, once the lease row is
// share-locked. Set it before b's first put.
func SetControlStep(b *Backend, step func()) { b.controlStep = step }
