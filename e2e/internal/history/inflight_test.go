package history

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A tick admitted and not yet started counts as a run still going: its
// claim (within the claim timeout) and then the read of the pauses
// (within PauseRead) come before its start, both counted from its
// admission, which is its tick or the start of the term's schedule loop
// if later. The 2026-11-28 soaks found both: consul-cluster term 6235,
// whose tick 21:10:15 was decided 8.2 s after it (pause state unknown),
// and etcd term 17013, whose loop began 5 s late (its catch-up's read of
// the last claims timed out) and whose first tick was still being
// claimed 6 s after it.

// stillGoing returns b's (term 20) skips of ticks from..to, each logged
// at skipAt(tick).
func stillGoing(from, to int, skipAt func(tick int) float64) []Misfire {
	var ms []Misfire
	for s := from; s <= to; s++ {
		ms = append(ms, Misfire{Instance: "b", Token: 20, Job: "j", Tick: at(float64(s)), At: at(skipAt(s)), Reason: StillGoing})
	}
	return ms
}

// pauseReadSlow: b admits tick 13 at 13 s; its claim and its read of the
// pauses take until decided (a misfire), and b skips ticks 14..to while
// it is in flight.
func pauseReadSlow(to int, decided float64) Input {
	in := clean()
	in.To = at(float64(to))
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 20 && !s.CatchUp })
	// b's catch-up run (tick 12) ended at once: no run of its was going.
	in.Ends = []End{{Job: "j", Tick: at(12), Token: 20, Instance: "b", At: at(12.6), Line: 50}}
	in.Misfires = append(stillGoing(14, to, func(s int) float64 { return float64(s) + 0.001 }),
		Misfire{Instance: "b", Token: 20, Job: "j", Tick: at(13), At: at(decided), Reason: "run not started: pause state unknown"},
		// b's loop ran at 13 s: another job's tick 13, skipped.
		Misfire{Instance: "b", Token: 20, Job: "k", Tick: at(13), At: at(13.001), Reason: "tick skipped: job paused"})
	return in
}

func TestCheck_StillGoingWithinClaimAndPauseRead(t *testing.T) {
	in := pauseReadSlow(20, 21.2)
	in.PauseRead = 5 * time.Second
	if r := Check(in); !r.OK() {
		t.Errorf("tick 13 in flight until 21.2 s (claim and pause read, 10 s from its admission): %v", r.Violations)
	}
	// Without a pause read (no control store) the bound is the claim
	// timeout alone: the skips of 19 and 20 are past it.
	in.PauseRead = 0
	r := Check(in)
	if !lostAt(r, 19) || !lostAt(r, 20) || lostAt(r, 18) {
		t.Errorf("no pause read: want ticks 19 and 20 lost, 18 not: %v", r.Violations)
	}
}

func TestCheck_StillGoingPastPauseReadIsLost(t *testing.T) {
	// In flight until 26 s: the skip of 23 is within 10 s and the
	// slack of its admission, the skip of 24 is not.
	in := pauseReadSlow(25, 26)
	in.PauseRead = 5 * time.Second
	r := Check(in)
	if lostAt(r, 23) || !lostAt(r, 24) || !lostAt(r, 25) {
		t.Errorf("tick 13 in flight 13..26 s, bound 10 s: want 24 and 25 lost, 23 not: %v", r.Violations)
	}
	// Decided at 15 s: the skips after that have no run going.
	in = pauseReadSlow(20, 15)
	in.PauseRead = 5 * time.Second
	r = Check(in)
	if !lostAt(r, 16) || lostAt(r, 14) {
		t.Errorf("tick 13 decided at 15 s: want 16 lost, 14 not: %v", r.Violations)
	}
}

// lateLoop: b's catch-up cannot read the last claims and gives up at
// 17.5 s; its loop then admits tick 13, skips 14..17 at once (still
// going), and 18..20 as they fire; tick 13's claim fails at 21 s.
// firstSkip moves the skips of 14..17 (the loop's first events).
func lateLoop(firstSkip func(tick int) float64) Input {
	in := clean()
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 20 })
	in.LastClaims = nil
	in.Misfires = append(stillGoing(14, 17, firstSkip), stillGoing(18, 20, func(s int) float64 { return float64(s) + 0.001 })...)
	in.Misfires = append(in.Misfires,
		Misfire{Instance: "b", Token: 20, At: at(17.5), Reason: "catch-up skipped: reading last claimed ticks failed"},
		Misfire{Instance: "b", Token: 20, Job: "j", Tick: at(13), At: at(21), Reason: "run not started: claim failed"})
	return in
}

func TestCheck_StillGoingFromALateLoop(t *testing.T) {
	late := lateLoop(func(int) float64 { return 17.5 })
	// A run with b's token by another instance is not b's loop.
	late.Starts = append(late.Starts, Start{Job: "k", Tick: at(5), Token: 20, Instance: "x", At: at(5.001), Line: 81})
	r := Check(late)
	for s := 14.0; s <= 20; s++ {
		if lostAt(r, s) {
			t.Errorf("tick %v: tick 13 admitted when the loop began at 17.5 s, in flight until 21 s: %v", s, r.Violations)
		}
	}
	// The loop ran from 14 s (its skips say so): tick 13 was admitted
	// by then, and its claim is past the claim timeout at the skip of 20.
	r = Check(lateLoop(func(s int) float64 { return float64(s) + 0.001 }))
	if !lostAt(r, 20) || lostAt(r, 19) {
		t.Errorf("loop began by 14 s: want tick 20 lost, 19 not: %v", r.Violations)
	}
	// The loop ran from 14 s, as a run of another job shows.
	in := lateLoop(func(int) float64 { return 17.5 })
	in.Starts = append(in.Starts, Start{Job: "k", Tick: at(14), Token: 20, Instance: "b", At: at(14.001), Line: 80})
	r = Check(in)
	if !lostAt(r, 20) || lostAt(r, 19) {
		t.Errorf("b's loop started a run at 14 s: want tick 20 lost, 19 not: %v", r.Violations)
	}
}

// staleAtStart: a (term 10) is killed at 9.5 s after tick 9; x (term 15)
// begins at 10.95 s, within the slack before tick 11, runs its catch-up
// (tick 10), and its claim of tick 11 is refused as stale at 11.5 s; b
// (term 20) begins at 12.5 s and its catch-up of tick 12 stands for the
// ticks from catchUpFrom, having read lastClaimed. The 2026-11-28 consul soak found this shape
// (term 11851, tick 21:17:55) during a restart of the Consul server.
func staleAtStart(catchUpFrom, lastClaimed float64) Input {
	in := clean()
	in.Terms = []Term{
		{Instance: "a", Token: 10, Start: at(0.5), Stop: at(9.5), Killed: true},
		{Instance: "x", Token: 15, Start: at(10.95), Stop: at(11.5), Lost: at(11.5), End: at(11.6)},
		{Instance: "b", Token: 20, Start: at(12.5)},
	}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(10), Token: 15, Instance: "x", At: at(11), CatchUp: true, CatchUpFrom: at(10), Line: 60})
	setCatchUpFrom(&in, 20, catchUpFrom)
	in.LastClaims = []LastClaim{{Instance: "x", Token: 15, Job: "j", Tick: at(9)}, {Instance: "b", Token: 20, Job: "j", Tick: at(lastClaimed)}}
	in.Misfires = []Misfire{{Instance: "x", Token: 15, Job: "j", Tick: at(11), At: at(11.5), Reason: StaleRefused}}
	return in
}

func TestCheck_StaleRefusedAtTermStart(t *testing.T) {
	r := Check(staleAtStart(11, 10))
	if !r.OK() {
		t.Fatalf("x's claim of 11 refused as stale, b's catch-up from 11: %v", r.Violations)
	}
	if r.Accounted["claim refused as stale, then catch-up"] != 1 {
		t.Errorf("accounted %v, want tick 11 as refused, then caught up", r.Accounted)
	}
	// x's claim had landed before the refusal: b read tick 11 as the
	// last claimed, and nobody runs it (at most once).
	r = Check(staleAtStart(12, 11))
	if !r.OK() || r.Accounted["claim refused as stale, then its claim landed"] != 1 {
		t.Errorf("b read 11 as claimed: %v, accounted %v", r.Violations, r.Accounted)
	}
	for _, c := range []struct {
		name string
		edit func(in *Input)
	}{
		// b's catch-up does not stand for 11, and it read 10.
		{"b's catch-up from 12", func(in *Input) { setCatchUpFrom(in, 20, 12) }},
		{"x still live", func(in *Input) {
			in.Terms[1].Stop, in.Terms[1].Lost, in.Terms[1].End = time.Time{}, time.Time{}, time.Time{}
		}},
		{"x's refusal is of tick 12", func(in *Input) { in.Misfires[0].Tick = at(12) }},
	} {
		in := staleAtStart(11, 10)
		c.edit(&in)
		if r := Check(in); !lostAt(r, 11) {
			t.Errorf("%s: tick 11 not reported lost: %v", c.name, r.Violations)
		}
	}
}

// setCatchUpFrom sets the first tick the catch-up runs of term tok stand
// for.
func setCatchUpFrom(in *Input, tok uint64, from float64) {
	for i, s := range in.Starts {
		if s.CatchUp && s.Token == tok {
			in.Starts[i].CatchUpFrom = at(from)
		}
	}
}

// staleAtStop: a (term 10) runs ticks 1..9 and its claim of tick 10 is
// refused as stale at 10.05 s, within the slack after the tick, as its
// lease lapses; b (term 20) read lastClaimed and its catch-up stands for
// the ticks from 11. The 2026-11-28 consul soak found this shape (lane
// 3, term 17250, nap tick 21:25:50): a partitioned leader's claim,
// queued behind the partition, landed when it healed, before the lock
// passed on.
func staleAtStop(lastClaimed float64) Input {
	in := clean()
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.05), Lost: at(10.05), End: at(10.1)}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) })
	in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(10), At: at(10.05), Reason: StaleRefused}}
	in.LastClaims[0].Tick = at(lastClaimed)
	return in
}

func TestCheck_StaleRefusedByTheTermBefore(t *testing.T) {
	r := Check(staleAtStop(10))
	if !r.OK() || r.Accounted["claim refused as stale by the term before (the claim landed)"] != 1 {
		t.Fatalf("a's claim of 10 refused as stale, b read 10 as claimed: %v, accounted %v", r.Violations, r.Accounted)
	}
	for _, c := range []struct {
		name string
		edit func(in *Input)
	}{
		{"b read 9", func(in *Input) { in.LastClaims[0].Tick = at(9) }},
		{"a's refusal is of tick 9", func(in *Input) { in.Misfires[0].Tick = at(9) }},
		{"the refusal is b's", func(in *Input) { in.Misfires[0].Instance, in.Misfires[0].Token = "b", 20 }},
		// c led between a and b, from before tick 10: a's refusal does
		// not say that c had nothing to do with 10.
		{"a term between a and b", func(in *Input) {
			in.Terms = slices.Insert(in.Terms, 1, Term{Instance: "c", Token: 15, Start: at(9.8), Stop: at(9.85), Lost: at(9.85)})
		}},
	} {
		in := staleAtStop(10)
		c.edit(&in)
		if r := Check(in); !lostAt(r, 10) {
			t.Errorf("%s: tick 10 not reported lost: %v", c.name, r.Violations)
		}
	}
}

// stopping: b (term 20) steps down at 15.05 s; its tick 15, admitted and
// not claimed, does not start, as it logs at skipAt; c (term 30) begins
// at 17.5 s and its catch-up stands for 16 and 17.
func stopping(skipAt float64) Input {
	in := clean()
	in.To = at(17)
	in.HandoverBound = 3 * time.Second
	in.Terms[1] = Term{Instance: "b", Token: 20, Start: at(12.5), Stop: at(15.05), End: at(15.2), SteppedDown: true, Graceful: true}
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 30, Start: at(17.5)})
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.After(at(14)) })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(17), Token: 30, Instance: "c", At: at(17.51), CatchUp: true, CatchUpFrom: at(16), Line: 70})
	in.LastClaims = append(in.LastClaims, LastClaim{Instance: "c", Token: 30, Job: "j", Tick: at(15)})
	in.Misfires = []Misfire{{Instance: "b", Token: 20, Job: "j", Tick: at(15), At: at(skipAt), Reason: TermStopping}}
	return in
}

func TestCheck_TermStoppingNeedsTheStop(t *testing.T) {
	if r := Check(stopping(15.06)); !r.OK() {
		t.Errorf("b stopped at 15.05 s, said so for tick 15 at 15.06 s: %v", r.Violations)
	}
	// Said 300 ms before b stopped: the reason does not hold.
	if r := Check(stopping(14.75)); !lostAt(r, 15) {
		t.Errorf("b said it was stopping 300 ms before its stop: tick 15 not reported lost: %v", r.Violations)
	}
}

// A lost tick's violation names a run its node logged as started of
// which the job wrote no line: kept as evidence, it excuses nothing.
func TestCheck_LostTickNamesAnUnwrittenRun(t *testing.T) {
	in := clean()
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(15)) })
	in.Unwritten = []Misfire{
		{Instance: "b", Token: 20, Job: "j", Tick: at(15), At: at(15.01)},
		{Instance: "b", Token: 20, Job: "k", Tick: at(16), At: at(16.01)}, // another job's
		{Instance: "b", Token: 20, Job: "j", Tick: at(14), At: at(14.01)}, // before the tick
		{Instance: "b", Token: 20, Job: "j", Tick: at(21), At: at(21.01)}, // past the grace
	}
	r := Check(in)
	if !lostAt(r, 15) {
		t.Fatalf("tick 15 not reported lost: %v", r.Violations)
	}
	if want := "b (term 20) logged tick 2026-01-01T00:00:15Z's run as started at 2026-01-01T00:00:15.01Z"; !strings.Contains(r.Violations[0].Detail, want) {
		t.Errorf("violation %q does not say %q", r.Violations[0].Detail, want)
	}
	if n := strings.Count(r.Violations[0].Detail, "logged tick"); n != 1 {
		t.Errorf("violation %q names %d runs, want only tick 15's", r.Violations[0].Detail, n)
	}
}

// killedAsking: a (term 10) is killed at 9.5 s; c (term 15) begins at
// 10.95 s, within the slack before tick 11, catches up tick 10, takes
// tick 11 in its loop and asks for its claim again, skips 12 for it, and
// is killed at 12.5 s with the claim in flight; b (term 20) begins at
// 13.5 s, reads lastClaimed and its catch-up of 13 stands for the ticks
// from catchUpFrom. The 2026-11-29 consul soak found it: term 9406 began
// 132 ms before tick 04:00:18, asked for its claim three times on a
// reset connection, and was killed; term 9461 caught up from 18.
func killedAsking(catchUpFrom, lastClaimed float64) Input {
	in := clean()
	in.Terms = []Term{
		{Instance: "a", Token: 10, Start: at(0.5), Stop: at(9.5), Killed: true},
		{Instance: "c", Token: 15, Start: at(10.95), Stop: at(12.5), Killed: true},
		{Instance: "b", Token: 20, Start: at(13.5)},
	}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool {
		return (s.Token == 10 && s.Tick.Compare(at(10)) >= 0) || (s.Token == 20 && s.Tick.Compare(at(13)) <= 0)
	})
	in.Starts = append(in.Starts,
		Start{Job: "j", Tick: at(10), Token: 15, Instance: "c", At: at(10.96), CatchUp: true, CatchUpFrom: at(10), Line: 60},
		Start{Job: "j", Tick: at(13), Token: 20, Instance: "b", At: at(13.51), CatchUp: true, CatchUpFrom: at(catchUpFrom), Line: 61})
	in.LastClaims = []LastClaim{{Instance: "c", Token: 15, Job: "j", Tick: at(9)}, {Instance: "b", Token: 20, Job: "j", Tick: at(lastClaimed)}}
	in.Asked = []Misfire{{Instance: "c", Token: 15, Job: "j", Tick: at(11), At: at(11.1)}}
	in.Misfires = []Misfire{{Instance: "c", Token: 15, Job: "j", Tick: at(12), At: at(12.001), Reason: StillGoing}}
	return in
}

func TestCheck_KilledAskingAtTermStart(t *testing.T) {
	if r := Check(killedAsking(11, 10)); !r.OK() || r.Accounted["claim in flight when its instance was killed, then catch-up"] != 1 {
		t.Errorf("c killed with tick 11's claim in flight, b caught up from 11: violations %v, accounted %v", r.Violations, r.Accounted)
	}
	if r := Check(killedAsking(12, 11)); !r.OK() {
		t.Errorf("c's claim of 11 landed (b read it): %v", r.Violations)
	}
	for _, c := range []struct {
		name string
		in   func() Input
	}{
		{"b's catch-up stands for 12 on", func() Input { return killedAsking(12, 10) }},
		{"c's loop said nothing of 11", func() Input {
			in := killedAsking(11, 10)
			in.Asked = nil
			in.Misfires[0].Reason = "run not started: claim failed"
			return in
		}},
		{"c began after 11", func() Input {
			in := killedAsking(11, 10)
			in.Terms[1].Start = at(11.05)
			return in
		}},
		{"c was not killed", func() Input {
			in := killedAsking(11, 10)
			in.Terms[1].Killed, in.Terms[1].Lost = false, at(12.5)
			return in
		}},
	} {
		if r := Check(c.in()); !lostAt(r, 11) {
			t.Errorf("%s: tick 11 not reported lost: %v", c.name, r.Violations)
		}
	}
}
