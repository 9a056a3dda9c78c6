package history

import (
	"slices"
	"testing"
)

// loopTickFailed is clean() in which b leads from 12.95 s, reads tick 10
// as the last claim, and runs no catch-up for the missed ticks 11 and 12
// (within the 5 s grace); it logs the claim of tick failed as failed at
// 13.01 s (13 is its schedule loop's first tick), and runs 14 on.
func loopTickFailed(failed float64) Input {
	in := clean()
	in.Terms[1].Start = at(12.95)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.CatchUp || s.Tick.Equal(at(13)) })
	in.Misfires = []Misfire{{Instance: "b", Token: 20, Job: "j", Tick: at(failed), At: at(13.01), Reason: "run not started: claim failed"}}
	return in
}

// A claim failure stands for the catch-up only if it is of a tick the
// catch-up claims: one at or before the term began (its catch-up counts
// the missed ticks through then). The first tick of the schedule loop,
// 50 ms after the term began, is not one: the catch-up of 11 and 12 never
// ran.
func TestCheck_LoopTickClaimFailureIsNoCatchUp(t *testing.T) {
	r := Check(loopTickFailed(13))
	if !lostAt(r, 11) || !lostAt(r, 12) || r.LostTicks != 2 {
		t.Fatalf("b's loop tick 13 failed, no catch-up of 11 and 12: lost %d, violations %v, accounted %v; want 11 and 12 lost",
			r.LostTicks, r.Violations, r.Accounted)
	}
	// A tick as the term began is the catch-up's.
	in := loopTickFailed(13)
	in.Terms[1].Start = at(13)
	if r := Check(in); !r.OK() {
		t.Fatalf("b began at 13 s and its claim of 13 failed: %v", r.Violations)
	}
	// The catch-up's own tick, 12, failed: 11 and 12 are accounted for.
	in = loopTickFailed(12)
	in.Misfires[0].At = at(12.96)
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(13), Token: 20, Instance: "b", At: at(13.001), Line: 90})
	if r := Check(in); !r.OK() || r.Accounted["logged: run not started: claim failed (catch-up)"] != 1 {
		t.Fatalf("b's catch-up claim of 12 failed: violations %v, accounted %v", r.Violations, r.Accounted)
	}
	// Logged by b's instance in another term, it is not b's catch-up
	// (it still explains 12 itself, which nobody led).
	in.Misfires[0].Token = 25
	if r := Check(in); !lostAt(r, 11) {
		t.Errorf("a failure of tick 12 with token 25: 11 not reported lost; violations %v, accounted %v", r.Violations, r.Accounted)
	}
}
