package backendtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// testBatchSomeAlreadyClaimed checks that a claim of several jobs refuses
// only those whose tick is not after their last one.
func testBatchSomeAlreadyClaimed(t *testing.T, e LedgerElection) {
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
}

// testBatchStaleTermRefused checks that a claim of several jobs with an
// ended term's token refuses them all and records nothing, and that the
// new term's claim of the same ticks succeeds.
func testBatchStaleTermRefused(t *testing.T, e LedgerElection) {
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
}

// testBatchLargerThanMaxBatch checks that a Claim, LastClaimed and Finish
// of more than MaxBatch jobs decide each, chunk after chunk.
func testBatchLargerThanMaxBatch(t *testing.T, e LedgerElection) {
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
}
