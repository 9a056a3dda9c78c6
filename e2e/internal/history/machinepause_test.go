package history

import (
	"testing"
	"time"
)

// A pause of the whole machine (the suite sees its wall clock jump ahead
// of its monotonic clock) freezes every instance at once. The cases pin
// what it excuses and what it does not.

// pausedMachine is clean() with the machine paused from 10.2 s to 13 s
// (TTL 3 s) instead of a's kill: a's lease lapsed on the server, a found
// out at 14.4 s, and b led from 14.5 s with a catch-up of tick 14 that
// stands for 11..14.
func pausedMachine() Input {
	in := frozenLeader()
	in.Frozen = nil
	in.TTL = 3 * time.Second
	in.ClockSteps = []Interval{{From: at(10.2), To: at(13)}}
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(14.4), Lost: at(14.4), End: at(14.4)}
	return in
}

func TestCheck_MachinePauseLapsedALease(t *testing.T) {
	r := Check(pausedMachine())
	if !r.OK() {
		t.Fatalf("violations: %v", r.Violations)
	}
	if r.Accounted["frozen, then catch-up"] != 3 {
		t.Errorf("accounted %v, want ticks 11..13 as frozen, then catch-up", r.Accounted)
	}

	// Without the suite's own evidence of the pause, a's silence in a
	// live term is a lost tick, whatever b did.
	in := pausedMachine()
	in.ClockSteps = nil
	if r := Check(in); r.LostTicks != 3 {
		t.Errorf("no pause seen: lost %d, want 3: %v", r.LostTicks, r.Violations)
	}

	// a survived the pause: it went on leading past the TTL after the
	// wake (16 s), so it had to run its late ticks.
	in = pausedMachine()
	in.Terms[0].Stop, in.Terms[0].Lost, in.Terms[0].End = at(16.2), at(16.2), at(16.2)
	in.Terms[1].Start = at(16.3)
	if r := Check(in); r.LostTicks != 3 {
		t.Errorf("term outlived the pause by more than a TTL: lost %d, want 3: %v", r.LostTicks, r.Violations)
	}

	// A tick after the pause's end (and the slack) is not in it.
	in = pausedMachine()
	in.ClockSteps[0].To = at(11.5)
	in.TTL = 4 * time.Second // a's loss at 14.4 still within a TTL of the wake
	if r := Check(in); r.LostTicks != 2 || !lostAt(r, 12) || !lostAt(r, 13) {
		t.Errorf("ticks 12 and 13 after a pause that ended at 11.5 s: lost %d, want 2 (12, 13): %v", r.LostTicks, r.Violations)
	}
}

// survivedPause is a history in which the machine paused from 10.2 s to
// 13 s and a's term survived it: a logged the step, ran tick 13 as a
// catch-up standing for 12 (its grace, 1.5 s, leaves 11 out) and went on.
func survivedPause() Input {
	in := clean()
	in.Jobs["j"] = Policy{Every: time.Second, Misfire: "run-once", Grace: 1500 * time.Millisecond}
	in.TTL = 3 * time.Second
	in.Terms = in.Terms[:1]
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5)}
	in.LastClaims = nil
	in.ClockSteps = []Interval{{From: at(10.2), To: at(13)}}
	in.Steps = []Step{{Instance: "a", Token: 10, From: at(10.2), To: at(13)}}
	in.Starts = in.Starts[:10]
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(13), Token: 10, Instance: "a", At: at(13.01), CatchUp: true, CatchUpFrom: at(12), Line: 11})
	for s := 14; s <= 20; s++ {
		in.Starts = append(in.Starts, Start{Job: "j", Tick: at(float64(s)), Token: 10, Instance: "a", At: at(float64(s) + 0.001), Line: 10 + s})
	}
	return in
}

func TestCheck_MachinePauseSurvived(t *testing.T) {
	r := Check(survivedPause())
	if !r.OK() {
		t.Fatalf("violations: %v", r.Violations)
	}
	if r.Accounted["skipped over by a clock step, beyond grace"] != 1 || r.Accounted["catch-up"] != 1 {
		t.Errorf("accounted %v, want tick 11 beyond grace and 12 by the catch-up", r.Accounted)
	}

	for _, tc := range []struct {
		name string
		edit func(*Input)
		lost []float64
	}{
		{"baton's word only: no pause seen", func(in *Input) { in.ClockSteps = nil }, []float64{11}},
		{"pause seen, no step logged", func(in *Input) { in.Steps = nil }, []float64{11}},
		{"the step logged by another term", func(in *Input) { in.Steps[0].Token = 9 }, []float64{11}},
		{"the step's gap left the tick out", func(in *Input) { in.Steps[0].From = at(11) }, []float64{11}},
		{"the pause seen elsewhere", func(in *Input) { in.ClockSteps[0] = Interval{From: at(12), To: at(13)} }, []float64{11}},
		{"within the grace, no catch-up run", func(in *Input) { in.Starts = append(in.Starts[:10], in.Starts[11:]...) }, []float64{12, 13}},
		{"grace as long as the gap", func(in *Input) {
			in.Jobs["j"] = Policy{Every: time.Second, Misfire: "run-once", Grace: 2 * time.Second}
		}, []float64{11}},
	} {
		in := survivedPause()
		tc.edit(&in)
		r := Check(in)
		if r.LostTicks != len(tc.lost) {
			t.Errorf("%s: lost %d, want %d: %v", tc.name, r.LostTicks, len(tc.lost), r.Violations)
		}
		for _, s := range tc.lost {
			if !lostAt(r, s) {
				t.Errorf("%s: tick %v not reported lost: %v", tc.name, s, r.Violations)
			}
		}
	}

	// Under skip, the ticks skipped over are missed by policy.
	in := survivedPause()
	in.Jobs["j"] = Policy{Every: time.Second, Misfire: "skip"}
	in.Starts = append(in.Starts[:10], in.Starts[11:]...)
	if r := Check(in); !r.OK() || r.Accounted["skipped over by a clock step, skip policy"] != 3 {
		t.Errorf("skip policy: accounted %v, violations %v; want 11..13 skipped over", r.Accounted, r.Violations)
	}
}
