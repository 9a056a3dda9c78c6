package audit

import (
	"testing"
	"time"
)

// The lag runs back from when the report is made, not from the window's
// end: in a past window, a tick nothing records is missed, not pending.
func TestCompute_LagRunsBackFromNow(t *testing.T) {
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	every := func(Spec) (Next, error) {
		return func(t time.Time) time.Time { return t.Truncate(time.Second).Add(time.Second) }, nil
	}
	a := Account{Job: "j", Specs: []Spec{{At: start, Schedule: "@every 1s", Zone: "UTC"}}}
	for _, c := range []struct {
		now             time.Time
		pending, missed int64
	}{
		{time.Time{}, 10, 50},                 // now is To: its last 10 s are pending
		{start.Add(60 * time.Second), 10, 50}, // the same, said
		{start.Add(time.Hour), 0, 60},         // an hour on: all missed
	} {
		rep, err := Compute(Input{Account: a, From: start, To: start.Add(60 * time.Second), Now: c.now, Lag: 10 * time.Second, Schedules: every})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Classes[Pending] != c.pending || rep.Classes[Missed] != c.missed {
			t.Errorf("now %v: pending %d, missed %d; want %d, %d", c.now, rep.Classes[Pending], rep.Classes[Missed], c.pending, c.missed)
		}
	}
}

// A window whose not-ok ticks alternate with ok ones lists MaxListed
// ranges, and counts the rest as unlisted.
func TestCompute_ListsAtMostMaxListed(t *testing.T) {
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	next := func(t time.Time) time.Time { return t.Truncate(time.Second).Add(time.Second) }
	every := func(Spec) (Next, error) { return next, nil }
	a := Account{Job: "j", Specs: []Spec{{At: start, Schedule: "@every 1s", Zone: "UTC"}}}
	const ticks = 3000
	for i := 1; i <= ticks; i++ {
		tk := start.Add(time.Duration(i) * time.Second)
		r := Range{Class: Ran, Reason: ReasonOK, First: tk, Last: tk, Count: 1, Token: 1}
		if i%2 == 0 {
			r.Reason = ReasonFailed
		}
		a.Ranges = append(a.Ranges, r)
	}
	rep, err := Compute(Input{Account: a, From: start, To: start.Add(ticks * time.Second), Lag: 0, Schedules: every})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.NotOK) != MaxListed || rep.Unlisted != ticks/2-MaxListed || rep.Classes[Ran] != ticks {
		t.Errorf("listed %d, unlisted %d, ran %d; want %d, %d, %d", len(rep.NotOK), rep.Unlisted, rep.Classes[Ran], MaxListed, ticks/2-MaxListed, ticks)
	}
}
