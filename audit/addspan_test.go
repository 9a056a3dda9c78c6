package audit

import (
	"testing"
	"time"
)

// A range added across ticks already recorded fills the gaps on both
// sides of them: a run-once catch-up's gap (covered) that spans ticks an
// earlier term recorded (its overlap skips) keeps the ticks after them.
// The e2e suite's accounting on etcd showed two such ticks as missed:
// the covered range had been cut at the first recorded tick.
func TestAccount_AddAcrossRecordedTicks(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 22, 0, 0, time.UTC)
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	next := func(t time.Time) time.Time { return t.Truncate(time.Second).Add(time.Second) }
	var a Account
	a.Add(Range{Class: Ran, Reason: ReasonOK, First: sec(20), Last: sec(27), Count: 8, Token: 5}, next)
	a.Add(Range{Class: Skipped, Reason: ReasonOverlap, First: sec(29), Last: sec(33), Count: 5, Token: 5}, next)
	a.Add(Range{Class: Refused, Reason: ReasonClaimFailed, First: sec(34), Last: sec(34), Count: 1, Token: 5}, next)
	a.Add(Range{Class: Skipped, Reason: ReasonOverlap, First: sec(35), Last: sec(35), Count: 1, Token: 5}, next)
	if !a.Add(Range{Class: Covered, Reason: ReasonCatchUp, First: sec(28), Last: sec(37), Count: 10, By: sec(38)}, next) {
		t.Fatal("the covered ticks changed nothing")
	}
	want := map[int]Class{27: Ran, 28: Covered, 29: Skipped, 33: Skipped, 34: Refused, 35: Skipped, 36: Covered, 37: Covered}
	got := map[int]Class{}
	var n int64
	for _, r := range a.Ranges {
		n += r.Count
		for tk, k := r.First, int64(0); k < r.Count; tk, k = next(tk), k+1 {
			got[int(tk.Sub(t0)/time.Second)] = r.Class
		}
	}
	for s, c := range want {
		if got[s] != c {
			t.Errorf("tick :%d: %q, want %q; ranges %+v", s, got[s], c, a.Ranges)
		}
	}
	if n != 18 {
		t.Errorf("%d ticks recorded, want 18 (:20 through :37)", n)
	}
	// Across a range that the added one starts inside of, too.
	var b Account
	b.Add(Range{Class: Ran, Reason: ReasonOK, First: sec(20), Last: sec(30), Count: 11}, next)
	b.Add(Range{Class: Ran, Reason: ReasonOK, First: sec(32), Last: sec(33), Count: 2}, next)
	b.Add(Range{Class: Missed, Reason: ReasonNoLeader, First: sec(25), Last: sec(40), Count: 16}, next)
	n = 0
	for _, r := range b.Ranges {
		n += r.Count
	}
	if n != 21 {
		t.Errorf("%d ticks recorded, want 21 (:20 through :40): %+v", n, b.Ranges)
	}
}
