package audit

import (
	"testing"
	"time"
)

// A later term's run of a tick an earlier term skipped (or failed to
// claim) is what became of the tick: it takes the tick out of the
// skipped range; a skip or a refusal never takes a run's place.
func TestAdd_ARunOutranksASkipOfTheSameTick(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	next := func(t time.Time) time.Time { return t.Truncate(time.Second).Add(time.Second) }
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var a Account
	a.Add(Range{Class: Skipped, Reason: ReasonOverlap, First: at(1), Last: at(5), Count: 5, Token: 3}, next)
	if !a.Add(Range{Class: Ran, Reason: ReasonOK, First: at(3), Last: at(3), Count: 1, Token: 4}, next) {
		t.Fatal("the run of tick 3 changed nothing")
	}
	want := []struct {
		c           Class
		first, last int
		n           int64
	}{{Skipped, 1, 2, 2}, {Ran, 3, 3, 1}, {Skipped, 4, 5, 2}}
	if len(a.Ranges) != len(want) {
		t.Fatalf("ranges %+v, want %v", a.Ranges, want)
	}
	for i, w := range want {
		r := a.Ranges[i]
		if r.Class != w.c || !r.First.Equal(at(w.first)) || !r.Last.Equal(at(w.last)) || r.Count != w.n {
			t.Errorf("range %d = %s %v..%v (%d), want %s +%d..+%d (%d)", i, r.Class, r.First, r.Last, r.Count, w.c, w.first, w.last, w.n)
		}
	}
	if a.Add(Range{Class: Refused, Reason: ReasonStaleTerm, First: at(3), Last: at(3), Count: 1, Token: 5}, next) {
		t.Error("a refusal of tick 3 took the place of its run")
	}
	if a.Add(Range{Class: Lost, Reason: ReasonOutcomeUnknown, First: at(3), Last: at(3), Count: 1, Token: 5}, next) {
		t.Error("a lost record of tick 3 took the place of its run (the same rank: the first stays)")
	}
}
