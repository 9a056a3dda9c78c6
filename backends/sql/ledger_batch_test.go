package sql_test

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/ledger"
)

// Batches: round trips per chunk, history bounds, concurrent batches,
// stale batches, duplicates in one call.

// ctxLong is for batches of thousands of claims on a loaded machine.
func ctxLong(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// slowQueries gives a batch's statements room on a loaded machine (the
// default QueryTimeout is the test TTL, 2 s).
func slowQueries(c *testConfig) { c.QueryTimeout = 30 * time.Second }

// chunks is how many round trips n items take.
func chunks(n, maxBatch int) int64 { return int64((n + maxBatch - 1) / maxBatch) }

// claims returns claims of jobs at tick, in the order given.
func claims(jobs []string, tick time.Time, token uint64) []ledger.Claim {
	cs := make([]ledger.Claim, len(jobs))
	for i, job := range jobs {
		cs[i] = ledger.Claim{Job: job, Tick: tick, Token: token, Instance: "a", Started: tick}
	}
	return cs
}

// wantAll fails t unless every error is nil (want == nil) or wraps want.
func wantAll(t *testing.T, what string, errs []error, n int, want error) {
	t.Helper()
	if len(errs) != n {
		t.Fatalf("%s: %d errors for %d items", what, len(errs), n)
	}
	bad := 0
	for i, err := range errs {
		if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
			if bad++; bad <= 3 {
				t.Errorf("%s: item %d: %v, want %v", what, i, err, want)
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d items in all", what, bad)
	}
}

// TestLedger_RoundTripsPerChunk: a Claim of n claims is ceil(n/MaxBatch)
// statements on PostgreSQL, and as many transactions of at most seven
// statements on MySQL (two when every tick is claimed already); Finish
// and LastClaimed are one statement per chunk. History 1, so that every
// claim of a known job trims a run.
func TestLedger_RoundTripsPerChunk(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table, _, la := s.leader(t, "trips")
		db, rt := s.countingDB(t)
		lg := s.backend(t, db, table, "trips", func(c *testConfig) { c.History = 1; slowQueries(c) }).Ledger()
		ctx := ctxLong(t)
		maxBatch := lg.MaxBatch()
		n := 3*maxBatch - 7
		var all, even []string
		for i := range n {
			all = append(all, fmt.Sprintf("job-%05d", i))
			if i%2 == 0 {
				even = append(even, all[i])
			}
		}
		slices.Reverse(all) // the ledger sorts them
		my := s.dialect == sql.MySQL
		idle := my && hasIdleTransactionTimeout(s.admin)
		check := func(what string, items int, myStmts int64, tx bool) {
			t.Helper()
			k := chunks(items, maxBatch)
			var stmts, begins, commits int64 = k, 0, 0
			if my {
				if tx && idle { // SET SESSION idle_transaction_timeout before, and back after
					myStmts += 2
				}
				stmts = myStmts * k
				if tx {
					begins, commits = k, k
				}
			}
			if rt.stmts.Load() != stmts || rt.begins.Load() != begins || rt.commits.Load() != commits || rt.rollbacks.Load() != 0 {
				t.Errorf("%s, %d items (MaxBatch %d): %v; want %d statements, %d begins, %d commits", what, items, maxBatch, rt, stmts, begins, commits)
			} else {
				t.Logf("%s, %d items (MaxBatch %d): %v", what, items, maxBatch, rt)
			}
			rt.reset()
		}

		// On MySQL, the first round trip asks the server whether it has
		// JSON_TABLE.
		wantAll(t, "warm-up", lg.Claim(ctx, claims([]string{"warm-up"}, tick0, la.Token())), 1, nil)
		// New jobs: lease, lock, insert ticks, insert runs, read the runs
		// to trim (none).
		rt.reset()
		wantAll(t, "claims of new jobs", lg.Claim(ctx, claims(even, tick0, la.Token())), len(even), nil)
		check("claims of new jobs", len(even), 5, true)
		// Every chunk has new jobs and known ones: lease, lock, insert
		// ticks, update ticks, insert runs, read the runs to trim, trim.
		wantAll(t, "claims of new and known jobs", lg.Claim(ctx, claims(all, tick0.Add(time.Second), la.Token())), n, nil)
		check("claims of new and known jobs", n, 7, true)
		// Known jobs, newer ticks: all but the insert of ticks.
		wantAll(t, "claims of newer ticks", lg.Claim(ctx, claims(all, tick0.Add(2*time.Second), la.Token())), n, nil)
		check("claims of newer ticks", n, 6, true)
		// Nothing newer: lease, lock.
		wantAll(t, "claims of the same ticks", lg.Claim(ctx, claims(all, tick0.Add(2*time.Second), la.Token())), n, ledger.ErrTickClaimed)
		check("claims of the same ticks", n, 2, true)

		rs := make([]ledger.Run, n)
		for i, job := range all {
			rs[i] = ledger.Run{Job: job, Tick: tick0.Add(2 * time.Second), Token: la.Token(), Instance: "a",
				Ended: tick0.Add(3 * time.Second), Result: ledger.ResultOK}
		}
		wantAll(t, "finish", lg.Finish(ctx, rs), n, nil)
		check("finish", n, 1, false)
		last, err := lg.LastClaimed(ctx, append(all, "never"))
		if err != nil || len(last) != n+1 || !last[0].Equal(tick0.Add(2*time.Second)) || !last[n].IsZero() {
			t.Fatalf("LastClaimed: %d ticks, %v", len(last), err)
		}
		check("last claimed", n+1, 1, false)
		for _, i := range []int{0, maxBatch, n - 1} {
			h, err := lg.History(ctx, all[i], 10)
			if err != nil || len(h) != 1 || h[0].Result != ledger.ResultOK || !h[0].Tick.Equal(tick0.Add(2*time.Second)) {
				t.Errorf("History(%s) = %+v, %v; want the last run, finished", all[i], h, err)
			}
		}
	})
}

// TestLedger_BatchHistoryBounded: many batches of the same jobs keep
// every job's runs at History, the newest, after every round trip.
func TestLedger_BatchHistoryBounded(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table := s.newTable(t)
		a := s.candidate(t, table, "bounded", candOpts{})
		const keep = 3
		aa := s.backend(t, a.db, table, "bounded", func(c *testConfig) { c.History = keep; slowQueries(c) })
		la := acquire(t, aa, "a")
		defer release(t, la)
		lg := aa.Ledger()
		ctx := ctxLong(t)
		var jobs []string
		for i := range 40 {
			jobs = append(jobs, fmt.Sprintf("j%02d", i))
		}
		const rounds = 15
		for r := range rounds {
			// Round r claims the even jobs, or all of them: the odd ones
			// keep fewer runs than the even ones until they catch up.
			batch := jobs
			if r%3 == 0 {
				batch = nil
				for i := 0; i < len(jobs); i += 2 {
					batch = append(batch, jobs[i])
				}
			}
			wantAll(t, fmt.Sprintf("round %d", r), lg.Claim(ctx, claims(batch, tick0.Add(time.Duration(r)*time.Minute), la.Token())), len(batch), nil)
			var most int
			if err := s.admin.QueryRowContext(ctx, "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM "+table+"_runs GROUP BY job) c").Scan(&most); err != nil {
				t.Fatal(err)
			}
			if most > keep {
				t.Fatalf("after round %d a job has %d runs, want at most %d", r, most, keep)
			}
		}
		var rows int
		if err := s.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+"_runs").Scan(&rows); err != nil || rows != keep*len(jobs) {
			t.Errorf("%d rows in %s_runs (%v), want %d", rows, table, err, keep*len(jobs))
		}
		for _, job := range []string{jobs[0], jobs[1], jobs[len(jobs)-1]} {
			h, err := lg.History(ctx, job, 10)
			if err != nil || len(h) != keep || !h[0].Tick.Equal(tick0.Add((rounds-1)*time.Minute)) {
				t.Errorf("History(%s) = %+v, %v; want the newest %d", job, h, err, keep)
			}
		}
	})
}

// TestLedger_ConcurrentBatches: Claim calls whose jobs overlap, given in
// opposite orders, and chunks of one call, run side by side with Finish
// calls of the runs their trims delete (History 1), without a deadlock
// (the ledger logs every retried conflict) and each tick claimed once.
func TestLedger_ConcurrentBatches(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		// A long TTL: a round holds the lease row's share lock, which the
		// renewal waits for, for seconds on a loaded machine.
		table := s.newTable(t)
		a := s.candidate(t, table, "concurrent-batches", candOpts{timing: &election.Timing{TTL: 20 * time.Second}})
		la := acquire(t, a, "a")
		defer release(t, la)
		var logs testenv.Buffer
		db, _ := s.countingDB(t)
		b := s.backend(t, db, table, "concurrent-batches", func(c *testConfig) {
			c.History = 1
			c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			slowQueries(c)
		})
		lg := b.Ledger()
		ctx := ctxLong(t)
		m := 2*lg.MaxBatch() + 100
		var jobs []string
		for i := range m {
			jobs = append(jobs, fmt.Sprintf("job-%05d", i))
		}
		// Every job exists: no duplicate first claims (which MySQL retries)
		// below.
		wantAll(t, "first claims", lg.Claim(ctx, claims(jobs, tick0, la.Token())), m, nil)
		up, down := jobs[:m*3/4], slices.Clone(jobs[m/4:])
		slices.Reverse(down)
		for r := 1; r <= 4; r++ {
			tick := tick0.Add(time.Duration(r) * time.Second)
			start := time.Now()
			var wg sync.WaitGroup
			var upErrs, downErrs, finErrs []error
			wg.Go(func() { upErrs = lg.Claim(ctx, claims(up, tick, la.Token())) })
			wg.Go(func() { downErrs = lg.Claim(ctx, claims(down, tick, la.Token())) })
			wg.Go(func() {
				rs := make([]ledger.Run, m)
				for i, job := range jobs {
					rs[m-1-i] = ledger.Run{Job: job, Tick: tick.Add(-time.Second), Token: la.Token(), Ended: tick, Result: ledger.ResultOK}
				}
				finErrs = lg.Finish(ctx, rs)
			})
			wg.Wait()
			t.Logf("round %d: %v", r, time.Since(start))
			wantAll(t, fmt.Sprintf("round %d: finish", r), finErrs, m, nil)
			won := map[string]int{}
			for what, errs := range map[string][]error{"up": upErrs, "down": downErrs} {
				cs := up
				if what == "down" {
					cs = down
				}
				for i, err := range errs {
					switch {
					case err == nil:
						won[cs[i]]++
					case !errors.Is(err, ledger.ErrTickClaimed):
						t.Fatalf("round %d: %s claim %d (%s): %v", r, what, i, cs[i], err)
					}
				}
			}
			for _, job := range jobs {
				if won[job] != 1 {
					t.Fatalf("round %d: %s claimed %d times, want once", r, job, won[job])
				}
			}
		}
		if l := logs.String(); strings.Contains(l, "conflict") {
			t.Errorf("conflicts retried:\n%s", l)
		}
		last, err := lg.LastClaimed(ctx, jobs)
		if err != nil || !last[0].Equal(tick0.Add(4*time.Second)) || !last[m-1].Equal(tick0.Add(4*time.Second)) {
			t.Errorf("LastClaimed: %v, %v", last[:1], err)
		}
	})
}

// TestLedger_StaleBatchRecordsNothing: a batch of several chunks claimed
// with a token that no longer holds records nothing, new jobs or known
// ones, and each chunk stops at the lease check.
func TestLedger_StaleBatchRecordsNothing(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table := s.newTable(t)
		lead := backendtest.Leader(s.backend(t, s.admin, table, "stale-batch", nil))
		db, rt := s.countingDB(t)
		lg := s.backend(t, db, table, "stale-batch", slowQueries).Ledger()
		idle := s.dialect == sql.MySQL && hasIdleTransactionTimeout(s.admin)
		ctx := ctxLong(t)
		old := lead(t)
		var jobs []string
		for i := range 2*lg.MaxBatch() + 1 {
			jobs = append(jobs, fmt.Sprintf("job-%05d", i))
		}
		wantAll(t, "claims", lg.Claim(ctx, claims(jobs[:100], tick0, old)), 100, nil)
		snapshot := func() string {
			var ticks, runs int
			var sum int64
			if err := s.admin.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(last_tick % 1000000007), 0) FROM "+table+"_ticks").Scan(&ticks, &sum); err != nil {
				t.Fatal(err)
			}
			if err := s.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+"_runs").Scan(&runs); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%d ticks (sum %d), %d runs", ticks, sum, runs)
		}
		before := snapshot()
		cur := lead(t)
		rt.reset()
		errs := lg.Claim(ctx, claims(jobs, tick0.Add(time.Second), old))
		wantAll(t, "stale claims", errs, len(jobs), ledger.ErrStaleTerm)
		wantAll(t, "stale claims", errs, len(jobs), election.ErrLeadershipLost)
		if after := snapshot(); after != before {
			t.Errorf("a stale batch changed the ledger: %s, then %s", before, after)
		}
		k := chunks(len(jobs), lg.MaxBatch())
		if s.dialect == sql.MySQL {
			// Each chunk: begin, the lease check, rollback (on MariaDB also
			// the idle_transaction_timeout set and put back).
			want := k
			if idle {
				want = 3 * k
			}
			if rt.stmts.Load() != want || rt.begins.Load() != k || rt.commits.Load() != 0 || rt.rollbacks.Load() != k {
				t.Errorf("stale batch of %d chunks: %v", k, rt)
			}
		} else if rt.stmts.Load() != k {
			t.Errorf("stale batch of %d chunks: %v", k, rt)
		}
		wantAll(t, "claims of the new term", lg.Claim(ctx, claims(jobs, tick0.Add(time.Second), cur)), len(jobs), nil)
	})
}

// TestLedger_BatchDuplicates: a job twice in one Claim is claimed once,
// the later claim refused unsent (not ErrTickClaimed: the Host would
// take it for its own); on MySQL, names differing only in trailing spaces
// are the same row. A run twice in one Finish stores the later outcome.
func TestLedger_BatchDuplicates(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		_, a, la := s.leader(t, "duplicates")
		lg := a.Ledger()
		ctx := ctx5(t)
		at := func(job string, tick time.Time) ledger.Claim {
			return ledger.Claim{Job: job, Tick: tick, Token: la.Token(), Instance: "a", Started: tick}
		}
		t1 := tick0.Add(time.Minute)
		errs := lg.Claim(ctx, []ledger.Claim{at("x", tick0), at("y", tick0), at("x", t1), at("x ", t1)})
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("claims of x and y: %v, %v", errs[0], errs[1])
		}
		if errs[2] == nil || errors.Is(errs[2], ledger.ErrTickClaimed) || errors.Is(errs[2], ledger.ErrStaleTerm) {
			t.Errorf("second claim of x in the call: %v, want an error that is neither sentinel", errs[2])
		}
		if padded := errs[3]; (s.dialect == sql.MySQL) == (padded == nil) {
			t.Errorf("claim of %q after %q in the call on %s: %v", "x ", "x", s.name, padded)
		}
		if last, err := lg.LastClaimed(ctx, []string{"x", "y"}); err != nil || !last[0].Equal(tick0) || !last[1].Equal(tick0) {
			t.Errorf("LastClaimed = %v, %v; want %v twice", last, err, tick0)
		}
		run := ledger.Run{Job: "x", Tick: tick0, Token: la.Token(), Ended: t1, Result: ledger.ResultFailed, Error: "first"}
		later := run
		later.Result, later.Error = ledger.ResultOK, ""
		wantAll(t, "finish twice", lg.Finish(ctx, []ledger.Run{run, later}), 2, nil)
		if h, err := lg.History(ctx, "x", 5); err != nil || len(h) != 1 || h[0].Result != ledger.ResultOK || h[0].Error != "" {
			t.Errorf("History(x) = %+v, %v; want the later outcome", h, err)
		}
	})
}

// hasIdleTransactionTimeout reports whether the server has
// idle_transaction_timeout (MariaDB does, MySQL does not): the ledger's
// claim transactions then set it, two statements more.
func hasIdleTransactionTimeout(db *dbsql.DB) bool {
	var v int64
	return db.QueryRow("SELECT @@idle_transaction_timeout").Scan(&v) == nil
}
