package sql

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton/ledger"
)

// Ledger returns the ledger.Ledger of b's election, kept in the
// tables Table_ticks and Table_runs of the same database (see the schema
// files). It is safe for concurrent use.
//
// Round trips: Claim and Finish carry MaxBatch (500) items per round
// trip: on PostgreSQL one statement; on MySQL, for Claim, one transaction
// of at most seven statements (two when every tick is claimed already),
// for Finish one statement. LastClaimed reads MaxBatch jobs per query,
// History is one query. Each round trip is bounded by ctx and
// Config.QueryTimeout. A Backend runs at most two ledger round trips at
// once (the chunks of a call, and concurrent calls, queue for them), so
// keep at least three idle connections in the pool with the renewals
// (DB.SetMaxIdleConns). The chunks of a call hold disjoint sets of jobs,
// and every round trip locks its rows in the order of their jobs, so
// that they never deadlock one another; a deadlock with another writer
// is retried.
//
// Rows: Table_ticks holds one row per job claimed, about 120 bytes with
// short names on PostgreSQL (row and primary key index) and 80 on MySQL;
// Table_runs up to Config.History rows per job, about 150 bytes each on
// PostgreSQL and 90 on MySQL; add to each row the lengths of the election
// and job names (twice on PostgreSQL, in the row and in the index), and
// to a run those of its instance name and error text (cut at 8 KiB).
// With the default History of 20, 1,000 jobs take about 3 MB on
// PostgreSQL (more between vacuums) and 2 MB on MySQL. Each claim deletes
// its job's runs beyond History in the same round trip.
//
// Ticks are stored as unix nanoseconds, so a tick round-trips exactly
// (times between the years 1678 and 2262); the instant is kept, the
// location is not (ticks come back in UTC). Started and Ended are stored
// with microsecond precision. Job names must be valid UTF-8 without NUL
// bytes; an instance name or error text that is not is stored with the
// offending bytes replaced.
func (b *Backend) Ledger() ledger.Ledger { return &tickLedger{b: b} }

type tickLedger struct{ b *Backend }

var _ ledger.Ledger = (*tickLedger)(nil)

// maxErrorLen bounds the error text stored with a run, in bytes.
const maxErrorLen = 8 << 10

// Claims (and finishes, and jobs read by LastClaimed) per round trip.
// The cost of a claim hardly depends on the chunk's size above 100 (the
// statement's fixed cost is a small part of it: on a loaded 2-core
// machine, 1,000 claims took the same time in chunks of 100, 250, 500
// or 1,000), while a chunk holds its rows' locks, and the lease row's
// share lock that a renewal waits for, until it commits. 500 keeps a
// chunk to tens of milliseconds (a claim cost about 50 µs on PostgreSQL
// and 100 µs on MariaDB on that machine, busy with other work) and lets
// the two round trips in flight share the work of an instant of 1,000
// jobs.
const (
	maxBatchPG    = 500
	maxBatchMySQL = 500
)

// ledgerParallel bounds how many ledger round trips of one Backend run at
// once, whichever calls they belong to: the chunks of one Claim, and the
// Host's concurrent calls of one instant, queue for them. Two, because a
// database/sql pool keeps two idle connections unless told otherwise
// (SetMaxIdleConns): with four at once, every instant closed and reopened
// connections (and PostgreSQL prepared the statement again on each), and
// 10,000 claims took twice as long as with two on a 2-core machine; with
// the idle connections raised to 8, four at once were no faster than two.
const ledgerParallel = 2

// MaxBatch implements ledger.Ledger.
func (l *tickLedger) MaxBatch() int {
	if l.b.drv.Dialect == MySQL {
		return maxBatchMySQL
	}
	return maxBatchPG
}

// tickNanos converts a tick to unix nanoseconds, refusing times that do
// not fit.
func tickNanos(job string, tick time.Time) (int64, error) {
	n := tick.UnixNano()
	if tick.IsZero() || !time.Unix(0, n).Equal(tick) {
		return 0, fmt.Errorf("sql: job %q: %w: tick %v outside the years 1678-2262", job, ErrInvalidName, tick)
	}
	return n, nil
}

// checkJob refuses a job name the tables cannot hold, or that would fail
// the whole statement carrying it (a NUL byte or invalid UTF-8).
func checkJob(job string) error {
	if job == "" || utf8.RuneCountInString(job) > MaxNameLen {
		return fmt.Errorf("sql: %w: job %q: want 1 to %d characters", ErrInvalidName, job, MaxNameLen)
	}
	if !utf8.ValidString(job) || strings.ContainsRune(job, 0) {
		return fmt.Errorf("sql: %w: job %q: not valid UTF-8, or holds a NUL byte", ErrInvalidName, job)
	}
	return nil
}

// cleanText makes informational text (an instance name, a run's error)
// storable in both dialects: valid UTF-8 without NUL bytes.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// jobKey is the identity of a job name in the dialect's primary key:
// exact on PostgreSQL; on MySQL, whose utf8mb4_bin compares with PAD
// SPACE, trailing spaces do not count ("a" and "a " are one row).
func (l *tickLedger) jobKey(job string) string {
	if l.b.drv.Dialect == MySQL {
		return strings.TrimRight(job, " ")
	}
	return job
}

// parallel calls f(0), ..., f(n-1), each on a goroutine of its own (the
// first on the caller's), and returns when all have returned. Each f
// queues for a round trip with slot.
func parallel(n int, f func(k int)) {
	var wg sync.WaitGroup
	for k := 1; k < n; k++ {
		wg.Go(func() { f(k) })
	}
	if n > 0 {
		f(0)
	}
	wg.Wait()
}

// slot waits for one of the Backend's ledgerParallel round trips, and
// returns the function that gives it back, or ctx's error.
func (l *tickLedger) slot(ctx context.Context) (func(), error) {
	select {
	case l.b.ledgerSlots <- struct{}{}:
		return func() { <-l.b.ledgerSlots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
