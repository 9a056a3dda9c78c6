package sql_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/driver"
	"github.com/batonhq/baton/ledger"
)

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

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
