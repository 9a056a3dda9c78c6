// Package ledgertest is the conformance suite every ledger.Ledger runs. A
// backend's test calls Run with a function that sets up a fresh election
// and its ledger; each subtest gets its own.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Election is one fresh election (no term held, no claims) with its
// ledger, as a backend's harness sets it up.
type Election struct {
	// Ledger is the election's ledger. Required.
	Ledger ledger.Ledger
	// Lead ends the term an earlier call of Lead started, if any, makes a
	// new term that holds the election, and returns its token. It blocks
	// until the term holds. Required.
	Lead func(t *testing.T) uint64
	// History is how many runs per job the ledger keeps. Zero means
	// ledger.DefaultHistory.
	History int
}

// tick0 is a whole second, so that every backend stores it exactly.
var tick0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

// Run runs the suite: each subtest calls newElection once. It blocks
// until every subtest is done.
func Run(t *testing.T, newElection func(t *testing.T) Election) {
	t.Run("ClaimRecordsRunning", func(t *testing.T) {
		e := newElection(t)
		tok := e.Lead(t)
		c := ledger.Claim{Job: "report", Tick: tick0, Token: tok, Instance: "node-a", CatchUp: true, Started: tick0.Add(time.Second)}
		if err := e.Ledger.Claim(ctx(t), c); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		lastIs(t, e.Ledger, "report", tick0)
		runs := history(t, e.Ledger, "report", 10)
		if len(runs) != 1 {
			t.Fatalf("History = %+v, want one run", runs)
		}
		r := runs[0]
		if r.Job != "report" || !r.Tick.Equal(tick0) || r.Token != tok || r.Instance != "node-a" || !r.CatchUp ||
			!r.Started.Equal(c.Started) || r.Result != ledger.ResultRunning || !r.Ended.IsZero() {
			t.Errorf("History()[0] = %+v, want the claim, running", r)
		}
	})
	t.Run("AlreadyClaimed", func(t *testing.T) {
		e := newElection(t)
		tok := e.Lead(t)
		claim := func(tick time.Time) error {
			return e.Ledger.Claim(ctx(t), ledger.Claim{Job: "report", Tick: tick, Token: tok, Instance: "node-a", Started: tick})
		}
		if err := claim(tick0.Add(time.Minute)); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		// The same instant in another zone is the same tick.
		for _, tick := range []time.Time{tick0.Add(time.Minute), tick0.Add(time.Minute).In(time.FixedZone("X", 3600)), tick0} {
			if err := claim(tick); !errors.Is(err, ledger.ErrTickClaimed) {
				t.Errorf("Claim at %v after %v: %v, want ErrTickClaimed", tick, tick0.Add(time.Minute), err)
			}
		}
		lastIs(t, e.Ledger, "report", tick0.Add(time.Minute))
		if runs := history(t, e.Ledger, "report", 10); len(runs) != 1 {
			t.Errorf("History after refused claims = %+v, want one run", runs)
		}
		// Another job's ticks are its own.
		if err := e.Ledger.Claim(ctx(t), ledger.Claim{Job: "other", Tick: tick0, Token: tok, Instance: "node-a", Started: tick0}); err != nil {
			t.Errorf("Claim of another job at an earlier tick: %v", err)
		}
	})
	t.Run("JobsAreSeparate", func(t *testing.T) {
		e := newElection(t)
		tok := e.Lead(t)
		// Names that share a prefix, or hold a slash or a space, are
		// separate jobs.
		jobs := []string{"mail", "mail/runs", "mail/daily report"}
		for i, job := range jobs {
			tick := tick0.Add(time.Duration(len(jobs)-i) * time.Minute) // later ticks first
			if err := e.Ledger.Claim(ctx(t), ledger.Claim{Job: job, Tick: tick, Token: tok, Instance: "node-a", Started: tick}); err != nil {
				t.Fatalf("Claim of %q: %v", job, err)
			}
		}
		for i, job := range jobs {
			tick := tick0.Add(time.Duration(len(jobs)-i) * time.Minute)
			lastIs(t, e.Ledger, job, tick)
			runs := history(t, e.Ledger, job, 10)
			if len(runs) != 1 || runs[0].Job != job || !runs[0].Tick.Equal(tick) {
				t.Errorf("History(%q) = %+v, want its one run", job, runs)
			}
		}
	})
	t.Run("StaleTermRefused", func(t *testing.T) {
		e := newElection(t)
		old := e.Lead(t)
		if err := e.Ledger.Claim(ctx(t), ledger.Claim{Job: "report", Tick: tick0, Token: old, Instance: "node-a", Started: tick0}); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		cur := e.Lead(t)
		if cur <= old {
			t.Fatalf("new term's token %d not above the old %d", cur, old)
		}
		next := tick0.Add(time.Minute)
		err := e.Ledger.Claim(ctx(t), ledger.Claim{Job: "report", Tick: next, Token: old, Instance: "node-a", Started: next})
		if !errors.Is(err, ledger.ErrStaleTerm) || !errors.Is(err, election.ErrLeadershipLost) {
			t.Fatalf("Claim with the old term's token: %v, want ErrStaleTerm wrapping ErrLeadershipLost", err)
		}
		lastIs(t, e.Ledger, "report", tick0)
		if err := e.Ledger.Claim(ctx(t), ledger.Claim{Job: "report", Tick: next, Token: cur, Instance: "node-b", Started: next}); err != nil {
			t.Errorf("Claim with the new term's token: %v", err)
		}
		lastIs(t, e.Ledger, "report", next)
	})
	t.Run("Finish", func(t *testing.T) {
		e := newElection(t)
		tok := e.Lead(t)
		if err := e.Ledger.Claim(ctx(t), ledger.Claim{Job: "report", Tick: tick0, Token: tok, Instance: "node-a", Started: tick0}); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		done := ledger.Run{Job: "report", Tick: tick0, Instance: "node-a", Token: tok, Started: tick0,
			Ended: tick0.Add(3 * time.Second), Result: ledger.ResultFailed, Error: "exit status 2"}
		if err := e.Ledger.Finish(ctx(t), done); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		runs := history(t, e.Ledger, "report", 10)
		if len(runs) != 1 {
			t.Fatalf("History = %+v, want one run", runs)
		}
		if r := runs[0]; !r.Tick.Equal(tick0) || r.Token != tok || r.Result != ledger.ResultFailed ||
			r.Error != done.Error || !r.Ended.Equal(done.Ended) {
			t.Errorf("History()[0] after Finish = %+v, want %+v", r, done)
		}
		// A run with no entry (trimmed, or never claimed) is ignored.
		gone := ledger.Run{Job: "report", Tick: tick0.Add(time.Hour), Token: tok, Result: ledger.ResultOK}
		if err := e.Ledger.Finish(ctx(t), gone); err != nil {
			t.Errorf("Finish of a run with no entry: %v", err)
		}
		if runs := history(t, e.Ledger, "report", 10); len(runs) != 1 || runs[0].Result != ledger.ResultFailed {
			t.Errorf("History after Finish of a run with no entry = %+v", runs)
		}
	})
	t.Run("HistoryNewestFirstAndBounded", func(t *testing.T) {
		e := newElection(t)
		keep := e.History
		if keep == 0 {
			keep = ledger.DefaultHistory
		}
		tok := e.Lead(t)
		n := keep + 3
		for i := range n {
			tick := tick0.Add(time.Duration(i) * time.Minute)
			if err := e.Ledger.Claim(ctx(t), ledger.Claim{Job: "report", Tick: tick, Token: tok, Instance: "node-a", Started: tick}); err != nil {
				t.Fatalf("Claim %d: %v", i, err)
			}
		}
		runs := history(t, e.Ledger, "report", n+10)
		if len(runs) != keep {
			t.Fatalf("History kept %d runs, want %d", len(runs), keep)
		}
		for i, r := range runs {
			if want := tick0.Add(time.Duration(n-1-i) * time.Minute); !r.Tick.Equal(want) {
				t.Errorf("History()[%d].Tick = %v, want %v (newest first)", i, r.Tick, want)
			}
		}
		if few := history(t, e.Ledger, "report", 2); len(few) != 2 || !few[0].Tick.Equal(runs[0].Tick) || !few[1].Tick.Equal(runs[1].Tick) {
			t.Errorf("History(2) = %+v, want the 2 newest", few)
		}
	})
	t.Run("JobWithNoClaims", func(t *testing.T) {
		e := newElection(t)
		e.Lead(t)
		lastIs(t, e.Ledger, "never", time.Time{})
		if runs := history(t, e.Ledger, "never", 10); len(runs) != 0 {
			t.Errorf("History of a job never claimed = %+v, want none", runs)
		}
		if err := e.Ledger.Finish(ctx(t), ledger.Run{Job: "never", Tick: tick0, Token: 1, Result: ledger.ResultOK}); err != nil {
			t.Errorf("Finish for a job never claimed: %v", err)
		}
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func lastIs(t *testing.T, l ledger.Ledger, job string, want time.Time) {
	t.Helper()
	got, err := l.LastClaimed(ctx(t), job)
	if err != nil {
		t.Fatalf("LastClaimed(%q): %v", job, err)
	}
	if !got.Equal(want) {
		t.Errorf("LastClaimed(%q) = %v, want %v", job, got, want)
	}
}

func history(t *testing.T, l ledger.Ledger, job string, n int) []ledger.Run {
	t.Helper()
	runs, err := l.History(ctx(t), job, n)
	if err != nil {
		t.Fatal(fmt.Errorf("History(%q, %d): %w", job, n, err))
	}
	return runs
}

// Leader returns a function for Election.Lead that takes terms of b, in
// the name of one candidate: each call releases the term the call before
// took, then acquires a new one (within 30s). The last term is released
// when the test that took it ends.
func Leader(b election.Backend) func(t *testing.T) uint64 {
	var cur election.Lease
	return func(t *testing.T) uint64 {
		t.Helper()
		if cur != nil {
			if err := cur.Release(ctx(t)); err != nil {
				t.Fatalf("release token %d: %v", cur.Token(), err)
			}
		}
		actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := b.Acquire(actx, election.Identity{ID: "ledgertest"})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		cur = l
		t.Cleanup(func() {
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = l.Release(rctx) // idempotent: a later Lead may have released it
		})
		return l.Token()
	}
}
