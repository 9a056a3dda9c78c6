package backendtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// LedgerElection is one fresh election (no term held, no claims) with its
// ledger, as a backend's harness sets it up.
type LedgerElection struct {
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

// RunLedger runs the suite: each subtest calls newElection once. It blocks
// until every subtest is done.
func RunLedger(t *testing.T, newElection func(t *testing.T) LedgerElection) {
	t.Run("ClaimRecordsRunning", func(t *testing.T) {
		e := newElection(t)
		tok := e.Lead(t)
		c := ledger.Claim{Job: "report", Tick: tick0, Token: tok, Instance: "node-a", CatchUp: true, Started: tick0.Add(time.Second)}
		if err := claim1(t, e.Ledger, c); err != nil {
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
			return claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: tick, Token: tok, Instance: "node-a", Started: tick})
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
		if err := claim1(t, e.Ledger, ledger.Claim{Job: "other", Tick: tick0, Token: tok, Instance: "node-a", Started: tick0}); err != nil {
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
			if err := claim1(t, e.Ledger, ledger.Claim{Job: job, Tick: tick, Token: tok, Instance: "node-a", Started: tick}); err != nil {
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
		if err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: tick0, Token: old, Instance: "node-a", Started: tick0}); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		cur := e.Lead(t)
		if cur <= old {
			t.Fatalf("new term's token %d not above the old %d", cur, old)
		}
		next := tick0.Add(time.Minute)
		err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: next, Token: old, Instance: "node-a", Started: next})
		if !errors.Is(err, ledger.ErrStaleTerm) || !errors.Is(err, election.ErrLeadershipLost) {
			t.Fatalf("Claim with the old term's token: %v, want ErrStaleTerm wrapping ErrLeadershipLost", err)
		}
		lastIs(t, e.Ledger, "report", tick0)
		if err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: next, Token: cur, Instance: "node-b", Started: next}); err != nil {
			t.Errorf("Claim with the new term's token: %v", err)
		}
		lastIs(t, e.Ledger, "report", next)
	})
	t.Run("Finish", func(t *testing.T) {
		e := newElection(t)
		tok := e.Lead(t)
		if err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: tick0, Token: tok, Instance: "node-a", Started: tick0}); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		done := ledger.Run{Job: "report", Tick: tick0, Instance: "node-a", Token: tok, Started: tick0,
			Ended: tick0.Add(3 * time.Second), Result: ledger.ResultFailed, Error: "exit status 2"}
		if err := finish1(t, e.Ledger, done); err != nil {
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
		if err := finish1(t, e.Ledger, gone); err != nil {
			t.Errorf("Finish of a run with no entry: %v", err)
		}
		if runs := history(t, e.Ledger, "report", 10); len(runs) != 1 || runs[0].Result != ledger.ResultFailed {
			t.Errorf("History after Finish of a run with no entry = %+v", runs)
		}
	})
	t.Run("FinishAttempts", func(t *testing.T) {
		e := newElection(t)
		tok := e.Lead(t)
		for i, attempts := range []int{3, 1, 0} {
			tick := tick0.Add(time.Duration(i) * time.Minute)
			if err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: tick, Token: tok, Instance: "node-a", Started: tick}); err != nil {
				t.Fatalf("Claim: %v", err)
			}
			if r := history(t, e.Ledger, "report", 1); len(r) != 1 || r[0].Attempts > 1 {
				t.Errorf("History after Claim = %+v, want one running run with at most one attempt", r)
			}
			done := ledger.Run{Job: "report", Tick: tick, Instance: "node-a", Token: tok, Started: tick,
				Ended: tick.Add(3 * time.Second), Result: ledger.ResultOK, Attempts: attempts}
			if err := finish1(t, e.Ledger, done); err != nil {
				t.Fatalf("Finish: %v", err)
			}
			runs := history(t, e.Ledger, "report", 1)
			if len(runs) != 1 || !runs[0].Tick.Equal(tick) {
				t.Fatalf("History = %+v, want the run at %v", runs, tick)
			}
			if got := runs[0].Attempts; got != attempts {
				t.Errorf("History()[0].Attempts after Finish with Attempts %d = %d", attempts, got)
			}
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
			if err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: tick, Token: tok, Instance: "node-a", Started: tick}); err != nil {
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
	t.Run("BatchSomeAlreadyClaimed", func(t *testing.T) {
		e := newElection(t)
		tok := e.Lead(t)
		at := func(job string, tick time.Time) ledger.Claim {
			return ledger.Claim{Job: job, Tick: tick, Token: tok, Instance: "node-a", Started: tick}
		}
		next := tick0.Add(time.Second)
		for _, job := range []string{"b", "d"} {
			if err := claim1(t, e.Ledger, at(job, next)); err != nil {
				t.Fatalf("Claim of %s: %v", job, err)
			}
		}
		// b and d are claimed at next already: b's tick is the same, d's is
		// earlier. a, c and e are new, e at an earlier tick than the rest.
		cs := []ledger.Claim{at("a", next), at("b", next), at("c", next), at("d", tick0), at("e", tick0)}
		errs := e.Ledger.Claim(ctx(t), cs)
		if len(errs) != len(cs) {
			t.Fatalf("Claim of %d returned %d errors", len(cs), len(errs))
		}
		for i, c := range cs {
			refused := c.Job == "b" || c.Job == "d"
			switch {
			case refused && !errors.Is(errs[i], ledger.ErrTickClaimed):
				t.Errorf("claim %d (%s at %v): %v, want ErrTickClaimed", i, c.Job, c.Tick, errs[i])
			case !refused && errs[i] != nil:
				t.Errorf("claim %d (%s at %v): %v, want claimed", i, c.Job, c.Tick, errs[i])
			}
		}
		for _, c := range cs {
			want := c.Tick
			if c.Job == "d" {
				want = next
			}
			lastIs(t, e.Ledger, c.Job, want)
			if runs := history(t, e.Ledger, c.Job, 10); len(runs) != 1 || !runs[0].Tick.Equal(want) {
				t.Errorf("History(%s) = %+v, want the one run at %v", c.Job, runs, want)
			}
		}
	})
	t.Run("BatchStaleTermRefused", func(t *testing.T) {
		e := newElection(t)
		old := e.Lead(t)
		if err := claim1(t, e.Ledger, ledger.Claim{Job: "a", Tick: tick0, Token: old, Instance: "node-a", Started: tick0}); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		cur := e.Lead(t)
		next := tick0.Add(time.Second)
		var cs []ledger.Claim
		for _, job := range []string{"a", "b", "c"} {
			cs = append(cs, ledger.Claim{Job: job, Tick: next, Token: old, Instance: "node-a", Started: next})
		}
		errs := e.Ledger.Claim(ctx(t), cs)
		if len(errs) != len(cs) {
			t.Fatalf("Claim of %d returned %d errors", len(cs), len(errs))
		}
		for i, err := range errs {
			if !errors.Is(err, ledger.ErrStaleTerm) || !errors.Is(err, election.ErrLeadershipLost) {
				t.Errorf("claim %d of the old term (%s): %v, want ErrStaleTerm wrapping ErrLeadershipLost", i, cs[i].Job, err)
			}
		}
		lastIs(t, e.Ledger, "a", tick0)
		lastIs(t, e.Ledger, "b", time.Time{})
		for i := range cs {
			cs[i].Token = cur
		}
		for i, err := range e.Ledger.Claim(ctx(t), cs) {
			if err != nil {
				t.Errorf("claim %d of the new term (%s): %v", i, cs[i].Job, err)
			}
		}
		lastIs(t, e.Ledger, "c", next)
	})
	t.Run("BatchLargerThanMaxBatch", func(t *testing.T) {
		e := newElection(t)
		tok := e.Lead(t)
		limit := e.Ledger.MaxBatch()
		if limit < 1 {
			t.Fatalf("MaxBatch() = %d, want at least 1", limit)
		}
		n := 2*limit + 3
		cs := make([]ledger.Claim, n)
		jobs := make([]string, n+1)
		for i := range cs {
			tick := tick0.Add(time.Duration(i%7) * time.Second)
			cs[i] = ledger.Claim{Job: fmt.Sprintf("job-%05d", i), Tick: tick, Token: tok, Instance: "node-a", Started: tick}
			jobs[i] = cs[i].Job
		}
		jobs[n] = "never"
		for i, err := range e.Ledger.Claim(ctx(t), cs) {
			if err != nil {
				t.Fatalf("claim %d of %d (MaxBatch %d): %v", i, n, limit, err)
			}
		}
		last, err := e.Ledger.LastClaimed(ctx(t), jobs)
		if err != nil {
			t.Fatalf("LastClaimed of %d jobs: %v", len(jobs), err)
		}
		if len(last) != len(jobs) {
			t.Fatalf("LastClaimed of %d jobs returned %d ticks", len(jobs), len(last))
		}
		for i, c := range cs {
			if !last[i].Equal(c.Tick) {
				t.Errorf("LastClaimed()[%d] (%s) = %v, want %v", i, c.Job, last[i], c.Tick)
			}
		}
		if !last[n].IsZero() {
			t.Errorf("LastClaimed of a job never claimed = %v, want zero", last[n])
		}
		rs := make([]ledger.Run, n)
		for i, c := range cs {
			rs[i] = ledger.Run{Job: c.Job, Tick: c.Tick, Instance: c.Instance, Token: tok, Started: c.Started,
				Ended: c.Started.Add(time.Second), Result: ledger.ResultOK}
		}
		rs = append(rs, ledger.Run{Job: "never", Tick: tick0, Token: tok, Result: ledger.ResultOK})
		errs := e.Ledger.Finish(ctx(t), rs)
		if len(errs) != len(rs) {
			t.Fatalf("Finish of %d returned %d errors", len(rs), len(errs))
		}
		for i, err := range errs {
			if err != nil {
				t.Errorf("finish %d (%s): %v", i, rs[i].Job, err)
			}
		}
		for _, i := range []int{0, limit - 1, limit, n - 1} {
			runs := history(t, e.Ledger, cs[i].Job, 10)
			if len(runs) != 1 || runs[0].Result != ledger.ResultOK || !runs[0].Ended.Equal(rs[i].Ended) {
				t.Errorf("History(%s) after Finish = %+v, want one run, ok", cs[i].Job, runs)
			}
		}
		if errs := e.Ledger.Claim(ctx(t), nil); len(errs) != 0 {
			t.Errorf("Claim of none returned %d errors", len(errs))
		}
	})
	t.Run("JobWithNoClaims", func(t *testing.T) {
		e := newElection(t)
		e.Lead(t)
		lastIs(t, e.Ledger, "never", time.Time{})
		if runs := history(t, e.Ledger, "never", 10); len(runs) != 0 {
			t.Errorf("History of a job never claimed = %+v, want none", runs)
		}
		if err := finish1(t, e.Ledger, ledger.Run{Job: "never", Tick: tick0, Token: 1, Result: ledger.ResultOK}); err != nil {
			t.Errorf("Finish for a job never claimed: %v", err)
		}
	})
	settleLedger(t, newElection)
}
