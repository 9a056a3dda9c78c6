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
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/ledger"
)

// ctxWithin is a context for a test's calls: it ends after d, or when
// the test does.
func ctxWithin(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func ctx5(t *testing.T) context.Context { return ctxWithin(t, 5*time.Second) }

// A tick with nanoseconds and a zone: it must come back Equal.
var tick0 = time.Date(2026, 3, 29, 1, 30, 0, 123456789, time.FixedZone("CET", 3600))

// The claims, history and Finish rules common to every ledger are checked
// by TestBackend (backendtest.RunLedger); what follows is SQL's own.

// TestLedger_Precision: ticks are kept to the nanosecond (one nanosecond
// earlier is claimed already, one later is new), Started to the
// microsecond.
func TestLedger_Precision(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		_, a, la := s.leader(t, "ledger")
		lg := a.Ledger()
		ctx := ctx5(t)

		started := time.Now()
		c := ledger.Claim{Job: "mail", Tick: tick0, Token: la.Token(), Instance: "a", Started: started}
		if err := lg.Claim(ctx, []ledger.Claim{c})[0]; err != nil {
			t.Fatalf("first claim: %v", err)
		}
		c2 := c
		c2.Tick = tick0.Add(-time.Nanosecond)
		if err := lg.Claim(ctx, []ledger.Claim{c2})[0]; !errors.Is(err, ledger.ErrTickClaimed) {
			t.Errorf("claim of %v after %v: %v, want ErrTickClaimed", c2.Tick, tick0, err)
		}
		if last, err := lg.LastClaimed(ctx, []string{"mail"}); err != nil || len(last) != 1 || !last[0].Equal(tick0) {
			t.Fatalf("LastClaimed = %v, %v; want [%v] exactly", last, err, tick0)
		}
		next := ledger.Claim{Job: "mail", Tick: tick0.Add(time.Nanosecond), Token: la.Token(), Instance: "a", CatchUp: true}
		if err := lg.Claim(ctx, []ledger.Claim{next})[0]; err != nil {
			t.Fatalf("claim of the next tick: %v", err)
		}
		h, err := lg.History(ctx, "mail", 10)
		if err != nil || len(h) != 2 {
			t.Fatalf("History = %+v, %v; want 2 runs", h, err)
		}
		if !h[0].Tick.Equal(next.Tick) || !h[0].CatchUp || !h[1].Tick.Equal(tick0) || h[1].CatchUp {
			t.Errorf("History not newest first or fields lost: %+v", h)
		}
		r := h[1]
		if r.Job != "mail" || r.Instance != "a" || r.Token != la.Token() || r.Result != ledger.ResultRunning ||
			!r.Started.Equal(started.Truncate(time.Microsecond)) || !r.Ended.IsZero() || r.Error != "" {
			t.Errorf("History[1] = %+v", r)
		}
	})
}

func TestLedger_ConcurrentClaims(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		_, a, la := s.leader(t, "concurrent")
		lg := a.Ledger()
		ctx := ctx5(t)
		// Eight goroutines claim the same first tick of each of four new
		// jobs: exactly one claim per job wins, none fails otherwise.
		var mu sync.Mutex
		won := map[string]int{}
		var wg sync.WaitGroup
		for i := range 32 {
			job := fmt.Sprintf("job%d", i%4)
			wg.Go(func() {
				err := lg.Claim(ctx, []ledger.Claim{{Job: job, Tick: tick0, Token: la.Token(), Instance: "a"}})[0]
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won[job]++
				case !errors.Is(err, ledger.ErrTickClaimed):
					t.Errorf("%s: %v", job, err)
				}
			})
		}
		wg.Wait()
		for i := range 4 {
			if n := won[fmt.Sprintf("job%d", i)]; n != 1 {
				t.Errorf("job%d claimed %d times, want once", i, n)
			}
		}
	})
}

// TestLedger_StaleTermAfterTakeover: after another candidate took over, a
// claim with the old token fails with ErrStaleTerm, and the old lease,
// still open locally (its next renewal is seconds away), ends at once when
// the Host ends its term (loseOnStale).
func TestLedger_StaleTermAfterTakeover(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table := s.newTable(t)
		slow := election.Timing{TTL: 10 * time.Second, RenewInterval: 4 * time.Second}
		a := s.candidate(t, table, "stale", candOpts{})
		aa := s.backend(t, a.db, table, "stale", func(c *testConfig) { c.Timing = slow })
		la := acquire(t, aa, "a")
		ctx := ctx5(t)
		if err := aa.Ledger().Claim(ctx, []ledger.Claim{{Job: "mail", Tick: tick0, Token: la.Token(), Instance: "a"}})[0]; err != nil {
			t.Fatal(err)
		}
		// The row expires early (by hand: as if a's renewals had stopped
		// reaching the database), and b takes over.
		handEdit(t, s, "UPDATE "+table+" SET expires_at = "+
			map[sql.Dialect]string{sql.Postgres: "clock_timestamp()", sql.MySQL: "UTC_TIMESTAMP(6)"}[s.dialect]+
			" WHERE election = 'stale'")
		b := s.candidate(t, table, "stale", candOpts{})
		lb := acquire(t, b, "b")
		defer release(t, lb)
		if !open(la) {
			t.Fatalf("a's lease ended before its stale claim: %v", la.Err())
		}
		stale := ledger.Claim{Job: "mail", Tick: tick0.Add(time.Minute), Token: la.Token(), Instance: "a"}
		err := aa.Ledger().Claim(ctx, []ledger.Claim{stale})[0]
		if !errors.Is(err, ledger.ErrStaleTerm) || !errors.Is(err, election.ErrLeadershipLost) {
			t.Fatalf("claim with the old token: %v, want ErrStaleTerm", err)
		}
		loseOnStale(la, err)
		select {
		case <-la.Done():
		default:
			t.Fatal("a's lease still open after its claim was refused as stale")
		}
		if !errors.Is(la.Err(), election.ErrLeadershipLost) || !strings.Contains(la.Err().Error(), "stale") {
			t.Errorf("a's Err() = %v", la.Err())
		}
		release(t, la)
		// The new term may claim the tick a could not, but not the one a
		// claimed.
		lg := b.Ledger()
		if err := lg.Claim(ctx, []ledger.Claim{{Job: "mail", Tick: tick0, Token: lb.Token(), Instance: "b"}})[0]; !errors.Is(err, ledger.ErrTickClaimed) {
			t.Errorf("b claiming a's tick: %v, want ErrTickClaimed", err)
		}
		stale.Token, stale.Instance = lb.Token(), "b"
		if err := lg.Claim(ctx, []ledger.Claim{stale})[0]; err != nil {
			t.Errorf("b claiming the next tick: %v", err)
		}
		if h, err := lg.History(ctx, "mail", 5); err != nil || len(h) != 2 || h[0].Instance != "b" || h[1].Instance != "a" {
			t.Errorf("History = %+v, %v", h, err)
		}
	})
}

func TestLedger_HistoryBoundedAndFinish(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table := s.newTable(t)
		a := s.candidate(t, table, "history", candOpts{})
		const keep = 5
		aa := s.backend(t, a.db, table, "history", func(c *testConfig) { c.History = keep })
		la := acquire(t, aa, "a")
		defer release(t, la)
		lg := aa.Ledger()
		ctx := ctx5(t)
		var ticks []time.Time
		for i := range 12 {
			tick := tick0.Add(time.Duration(i) * time.Minute)
			ticks = append(ticks, tick)
			if err := lg.Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick, Token: la.Token(), Instance: "a", Started: tick}})[0]; err != nil {
				t.Fatal(err)
			}
		}
		var rows int
		if err := s.admin.QueryRowContext(ctx, "SELECT count(*) FROM "+table+"_runs").Scan(&rows); err != nil || rows != keep {
			t.Errorf("%d rows in %s_runs (%v), want %d", rows, table, err, keep)
		}
		h, err := lg.History(ctx, "j", 100)
		if err != nil || len(h) != keep || !h[0].Tick.Equal(ticks[11]) || !h[keep-1].Tick.Equal(ticks[12-keep]) {
			t.Fatalf("History = %+v, %v; want the newest %d", h, err, keep)
		}
		if h2, _ := lg.History(ctx, "j", 2); len(h2) != 2 {
			t.Errorf("History(n=2) returned %d runs", len(h2))
		}

		ended := ticks[11].Add(1500 * time.Millisecond)
		done := h[0]
		done.Ended, done.Result, done.Error = ended, ledger.ResultFailed, "boom: "+strings.Repeat("é", 10000)
		if err := lg.Finish(ctx, []ledger.Run{done})[0]; err != nil {
			t.Fatal(err)
		}
		wrong := h[1]
		wrong.Token++
		wrong.Result = ledger.ResultOK
		if err := lg.Finish(ctx, []ledger.Run{wrong})[0]; err != nil { // another term's run: left alone
			t.Fatal(err)
		}
		gone := ledger.Run{Job: "j", Tick: ticks[0], Token: la.Token(), Result: ledger.ResultOK, Ended: ended}
		if err := lg.Finish(ctx, []ledger.Run{gone})[0]; err != nil { // trimmed: not an error
			t.Fatal(err)
		}
		h, err = lg.History(ctx, "j", 2)
		if err != nil {
			t.Fatal(err)
		}
		got := h[0]
		if got.Result != ledger.ResultFailed || !got.Ended.Equal(ended.Truncate(time.Microsecond)) || !strings.HasPrefix(got.Error, "boom: é") ||
			len(got.Error) > 8<<10 || !got.Started.Equal(ticks[11].Truncate(time.Microsecond)) || got.Instance != "a" {
			got.Error = got.Error[:min(len(got.Error), 20)] + "..."
			t.Errorf("finished run = %+v", got)
		}
		if h[1].Result != ledger.ResultRunning {
			t.Errorf("Finish with another token changed the run: %+v", h[1])
		}
	})
}

func TestLedger_Invalid(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		_, a, la := s.leader(t, "invalid")
		ctx := ctx5(t)
		for _, c := range []ledger.Claim{
			{Job: "", Tick: tick0, Token: la.Token()},
			{Job: strings.Repeat("x", 256), Tick: tick0, Token: la.Token()},
			{Job: "j", Token: la.Token()},
			{Job: "j", Tick: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), Token: la.Token()},
		} {
			if err := a.Ledger().Claim(ctx, []ledger.Claim{c})[0]; !errors.Is(err, sql.ErrInvalidName) {
				t.Errorf("Claim(job %.10q, tick %v) = %v, want ErrInvalidName", c.Job, c.Tick, err)
			}
		}
		if !open(la) {
			t.Errorf("lease ended after invalid claims: %v", la.Err())
		}
	})
}

// loseOnStale does what the Host does with a claim refused as stale: it
// ends the term at once (election.Term.Lose, through driver.Loser).
func loseOnStale(l election.Lease, err error) {
	if errors.Is(err, ledger.ErrStaleTerm) {
		l.(driver.Loser).Lose(err)
	}
}

// Batches: round trips per chunk, history bounds, concurrent batches,
// stale batches, duplicates in one call.

// ctxLong is for batches of thousands of claims on a loaded machine.
func ctxLong(t *testing.T) context.Context { return ctxWithin(t, 2*time.Minute) }

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
		var logs envtest.Buffer
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
