package audit

import (
	"testing"
	"time"

	"github.com/batonhq/baton/ledger"
)

// A term that was over when it skipped a tick (its skip reached the
// account by a late note, or by a write that raced the next term's
// fence) does not hide the run the next term made of it: the ledger's
// entry ranks above the skip, as the next write of the account would
// record it. The fault suite on kube found the skip shown over the run.
// A skip the ledger holds nothing of, and a run now's entry, change
// nothing; the caller's account is left as it was.
func TestComputeLedgerRunOutranksAStaleSkip(t *testing.T) {
	next := every(10 * time.Second)
	a := every10s()
	a.Add(span(next, Ran, ReasonOK, sec(10), sec(40)), next)
	skip := span(next, Skipped, ReasonOverlap, sec(50), sec(80))
	skip.Token, skip.Instance = 2, "node-1"
	a.Add(skip, next)
	history := []ledger.Run{
		{Job: "j", Tick: sec(60), Token: 3, Instance: "node-4", Result: ledger.ResultOK, Attempts: 1,
			Started: sec(60).Add(40 * time.Millisecond), Ended: sec(61)},
		{Job: "j", Tick: sec(70), Token: 3, Instance: "node-4", Result: ledger.ResultOK, RequestID: "r1",
			Started: sec(70), Ended: sec(71)},
	}
	before := describe(&a)
	rep := compute(t, Input{Account: a, History: history, From: t0, To: sec(80)})
	if rep.Classes[Ran] != 5 || rep.Classes[Skipped] != 3 || rep.Due != 8 {
		t.Errorf("classes %v of %d due, want 5 ran (10..40 and 60), 3 skipped (50, 70, 80): %q", rep.Classes, rep.Due, notOK(rep))
	}
	for _, r := range rep.NotOK {
		if !r.First.After(sec(60)) && !r.Last.Before(sec(60)) {
			t.Errorf("tick 60 listed not ok: %+v", r)
		}
	}
	if after := describe(&a); after != before {
		t.Errorf("Compute changed the caller's account: %s, was %s", after, before)
	}
}

// The kube fault scenario: term 2, already over, wrote its overlap skip
// of tick 34 before term 3 fenced the store; term 3's catch-up ran tick
// 34 and its runs of 34..38 reached the account joined as one range.
// The runs take the skip's place: before, only a one-tick record did,
// and the skip hid the run.
func TestAddJoinedRunsOutrankAStaleSkip(t *testing.T) {
	next := every(time.Second)
	var a Account
	a.Add(Range{Class: Covered, Reason: ReasonCatchUp, First: sec(33), Last: sec(33), Count: 1, Token: 3, By: sec(34)}, next)
	a.Add(Range{Class: Skipped, Reason: ReasonOverlap, First: sec(34), Last: sec(34), Count: 1, Token: 2}, next)
	if !a.Add(Range{Class: Ran, Reason: ReasonOK, First: sec(34), Last: sec(38), Count: 5, Token: 3}, next) {
		t.Fatal("the runs changed nothing")
	}
	checkRanges(t, &a, next)
	if got, want := describe(&a), "covered/catch-up 33-33 (1) ran/ok 34-38 (5)"; got != want {
		t.Errorf("ranges %s, want %s", got, want)
	}
}
