package history

import (
	"slices"
	"testing"
	"time"
)

// An "@every" anchored on the Unix epoch ticks at the whole multiples of
// its period since 1970-01-01T00:00:00Z, plus its offset, whatever term
// leads; a period that does not divide a day puts them elsewhere than the
// multiples since Go's zero time, which the checker takes otherwise.
func TestFirstTick(t *testing.T) {
	unix := func(s int64) time.Time { return time.Unix(s, 0) }
	for _, c := range []struct {
		name string
		p    Policy
		from time.Time
		want time.Time
	}{
		{"on a tick: the next", Policy{Every: 7 * time.Second, Epoch: true, Offset: 2 * time.Second}, unix(100), unix(107)},
		{"between ticks", Policy{Every: 7 * time.Second, Epoch: true, Offset: 2 * time.Second}, unix(101), unix(107)},
		{"just before a tick", Policy{Every: 7 * time.Second, Epoch: true, Offset: 2 * time.Second}, unix(106).Add(999 * time.Millisecond), unix(107)},
		{"no offset", Policy{Every: 7 * time.Second, Epoch: true}, unix(100), unix(105)},
		{"an offset beyond the period", Policy{Every: 7 * time.Second, Epoch: true, Offset: 9 * time.Second}, unix(100), unix(107)},
		{"a negative offset", Policy{Every: 7 * time.Second, Epoch: true, Offset: -5 * time.Second}, unix(100), unix(107)},
		{"before the epoch, on a tick", Policy{Every: 7 * time.Second, Epoch: true, Offset: 2 * time.Second}, unix(-5), unix(2)},
		{"before the epoch, between ticks", Policy{Every: 7 * time.Second, Epoch: true, Offset: 2 * time.Second}, unix(-6), unix(-5)},
		{"an hour's period", Policy{Every: time.Hour, Epoch: true, Offset: 90 * time.Second}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 1, 30, 0, time.UTC)},
		// Without Epoch, the multiples since the zero time: 62135596800 s
		// before the epoch, 4 s short of a multiple of 7 s.
		{"not anchored", Policy{Every: 7 * time.Second, Offset: 2 * time.Second}, unix(100), unix(101)},
		{"not anchored, a second's period", Policy{Every: time.Second}, unix(100).Add(300 * time.Millisecond), unix(101)},
	} {
		if got := firstTick(c.p, c.from); !got.Equal(c.want) {
			t.Errorf("%s: first tick after %s: %s, want %s", c.name, c.from.UTC().Format(time.RFC3339Nano), got.UTC().Format(time.RFC3339), c.want.UTC().Format(time.RFC3339))
		}
	}
}

// The tick accounting walks an epoch-anchored job's ticks: a run of each
// passes, a tick not run is lost; judged on the zero time's grid, the
// same runs would be ticks it never had.
func TestCheck_EpochAnchoredEvery(t *testing.T) {
	p := Policy{Every: 7 * time.Second, Misfire: "run-once", Grace: 5 * time.Second, Epoch: true, Offset: 2 * time.Second}
	in := clean()
	in.Jobs["e"] = p
	in.To = at(40)
	// t0 is 1767225600 s since the epoch, a multiple of 7 s: the ticks
	// are 2 s past t0, 9 s, ... On the zero time's grid they would be
	// 3 s past t0, 10 s, ...
	var ticks []time.Time
	for s := time.Unix(1767225600/7*7+2, 0); !s.After(in.To); s = s.Add(7 * time.Second) {
		if s.After(in.From) {
			ticks = append(ticks, s)
		}
	}
	if len(ticks) != 6 || !ticks[0].Equal(at(2)) {
		t.Fatalf("ticks %v, want 6 from 2 s past t0", ticks)
	}
	for s := 21; s <= 40; s++ { // b leads on; j's ticks through 40
		in.Starts = append(in.Starts, Start{Job: "j", Tick: at(float64(s)), Token: 20, Instance: "b", At: at(float64(s) + 0.001), Line: 100 + s})
	}
	for i, tk := range ticks {
		tok, inst := uint64(10), "a"
		if tk.After(at(12.5)) {
			tok, inst = 20, "b"
		}
		in.Starts = append(in.Starts, Start{Job: "e", Tick: tk, Token: tok, Instance: inst, At: tk.Add(2 * time.Millisecond), Line: 200 + i})
	}
	if r := Check(in); !r.OK() {
		t.Fatalf("every epoch tick run: %v", r.Violations)
	}
	lost := in
	lost.Starts = slices.DeleteFunc(slices.Clone(in.Starts), func(s Start) bool { return s.Job == "e" && s.Tick.Equal(at(30)) })
	if r := Check(lost); r.LostTicks != 1 || !lostAt(r, 30) {
		t.Fatalf("epoch tick 30 s not run: lost %d, violations %v; want 30 lost", r.LostTicks, r.Violations)
	}
	p.Epoch = false
	in.Jobs["e"] = p
	if r := Check(in); r.LostTicks != 6 {
		t.Errorf("the same runs on the zero time's grid: %d lost ticks, want 6: %v", r.LostTicks, r.Violations)
	}
}
