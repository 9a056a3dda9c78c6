package history

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The cases below pin conditions of the checker that the mutation run
// (make mutate) found no other test guarding. Each names the rule it
// holds and what a looser or stricter rule would get wrong.

// A term's bound: a killed term ends at its kill even after a step-down
// (SIGTERM, then SIGKILL during the drain); a term that stopped without a
// step-down, a loss or a kill (a lost-leadership line) ends at its stop.
func TestCheck_BoundsOfStoppedTerms(t *testing.T) {
	late := Start{Job: "x", Tick: at(10), Token: 10, Instance: "a", At: at(10.5), Line: 99}
	for _, tc := range []struct {
		name string
		term Term
	}{
		{"killed after stepping down", Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), SteppedDown: true, Killed: true}},
		{"stopped without a step-down", Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2)}},
	} {
		in := clean()
		in.Terms[0] = tc.term
		in.Starts = append(in.Starts, late)
		if r := Check(in); r.OutsideTerm != 1 {
			t.Errorf("%s: a start 300 ms after the stop: outside-term %d, want 1: %v", tc.name, r.OutsideTerm, r.Violations)
		}
	}
}

// Two terms with one token are a token-order violation.
func TestCheck_EqualTokens(t *testing.T) {
	in := clean()
	in.Terms[1].Token = 10
	for i := range in.Starts {
		if in.Starts[i].Instance == "b" {
			in.Starts[i].Token, in.Starts[i].Instance = 10, "a"
		}
	}
	if r := Check(in); r.TokenOrder != 1 {
		t.Errorf("token 10 twice: token-order %d, want 1: %v", r.TokenOrder, r.Violations)
	}
}

// The start-order check takes each term's earliest and latest start,
// whatever the order of the input.
func TestCheck_OverlapInAnyOrder(t *testing.T) {
	in := clean()
	in.Terms[0].Stop = time.Time{}
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(13.5), Token: 10, Instance: "a", At: at(13.5), Line: 99})
	slices.Reverse(in.Starts)
	if r := Check(in); r.Overlaps != 1 {
		t.Errorf("starts backwards: overlaps %d, want 1: %v", r.Overlaps, r.Violations)
	}
}

// Handover and failover edges: a graceful handover is timed from the
// release, so a fault window that ends before the release does not
// excuse it; a handover or crash failover of exactly its bound is within
// it; a failover after a loss (not a kill) is not a crash failover.
func TestCheck_TransitionEdges(t *testing.T) {
	in := clean()
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), End: at(10.3), Graceful: true, SteppedDown: true}
	in.Excused = []Interval{{From: at(10.1), To: at(10.25)}}
	if r := Check(in); r.SlowHandovers != 1 || r.Excused != 0 {
		t.Errorf("fault before the release: slow handovers %d, excused %d, want 1 and 0: %v", r.SlowHandovers, r.Excused, r.Violations)
	}
	in.Excused = nil
	in.HandoverBound = 2200 * time.Millisecond // 10.3 s to 12.5 s
	if r := Check(in); r.SlowHandovers != 0 {
		t.Errorf("handover of exactly its bound: %v", r.Violations)
	}

	in = clean()
	in.CrashBound = 2300 * time.Millisecond // killed at 10.2 s, b led at 12.5 s
	if r := Check(in); r.SlowFailovers != 0 {
		t.Errorf("crash failover of exactly its bound: %v", r.Violations)
	}
	// A term whose stop no log showed gives no transition time.
	in.Terms[0].Stop, in.Terms[0].Killed = time.Time{}, false
	in.Starts = in.Starts[:10]
	if r := Check(in); r.MaxFailover != 0 || r.MaxCrashFailover != 0 {
		t.Errorf("open term, then another: max failover %v, max crash failover %v; want none", r.MaxFailover, r.MaxCrashFailover)
	}
	in = clean()
	in.Terms[0].Killed, in.Terms[0].Lost = false, at(10.2)
	in.CrashBound = time.Second
	if r := Check(in); r.SlowFailovers != 0 || r.MaxCrashFailover != 0 || r.MaxFailover != 2300*time.Millisecond {
		t.Errorf("failover after a loss: slow failovers %d, max crash %v, max failover %v: %v",
			r.SlowFailovers, r.MaxCrashFailover, r.MaxFailover, r.Violations)
	}
}

// The drain is judged only where the jobs' end lines were read
// (Input.Ends), and only for terms released gracefully: a killed term's
// runs may never end.
func TestCheck_DrainOnlyOfGracefulTerms(t *testing.T) {
	in := clean()
	in.Terms[1] = Term{Instance: "b", Token: 20, Start: at(12.5), Stop: at(20.5), End: at(20.6), Graceful: true, SteppedDown: true}
	if r := Check(in); !r.OK() {
		t.Errorf("no end lines read: %v", r.Violations)
	}
	for _, s := range in.Starts {
		if s.Tick.Before(at(10)) { // a's run of tick 10 never ends: a was killed
			in.Ends = append(in.Ends, End{Job: s.Job, Tick: s.Tick, Token: s.Token, Instance: s.Instance, At: s.At.Add(time.Millisecond)})
		}
	}
	for _, s := range in.Starts {
		if s.Token == 20 {
			in.Ends = append(in.Ends, End{Job: s.Job, Tick: s.Tick, Token: s.Token, Instance: s.Instance, At: s.At.Add(time.Millisecond)})
		}
	}
	if r := Check(in); !r.OK() {
		t.Errorf("a killed term's run without an end: %v", r.Violations)
	}
	// The same for a term that lost its lease: it ended, but not by a
	// release.
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), Lost: at(10.2), End: at(10.25)}
	if r := Check(in); !r.OK() {
		t.Errorf("a lost term's run without an end: %v", r.Violations)
	}
}

// A job without a fixed period is not judged tick by tick.
func TestCheck_JobWithoutPeriod(t *testing.T) {
	in := clean()
	in.Jobs["manual"] = Policy{}
	in.Starts = append(in.Starts, Start{Job: "manual", Tick: at(13.2), Token: 20, Instance: "b", At: at(13.3), Line: 99})
	if r := Check(in); !r.OK() {
		t.Errorf("%v", r.Violations)
	}
}

// A term's span of records starts at its earliest record, whatever the
// order of the input: term 20's first line at 12.245 s, 5 ms before term
// 10's trapped job wrote its last, comes before its end line (12.255 s).
func TestCheck_TermOverlapByEarliestRecord(t *testing.T) {
	in := clean()
	in.Records = lostTermRecords(12.245)
	slices.Reverse(in.Records)
	if r := Check(in); r.TermOverlaps != 1 {
		t.Errorf("records backwards: term-overlaps %d, want 1: %v", r.TermOverlaps, r.Violations)
	}
}

// A run after a pause that was resumed later says when the resume was
// sent.
func TestCheck_AfterPauseSaysTheResume(t *testing.T) {
	in := clean()
	in.Jobs = nil
	in.Pauses = []Pause{{Job: "j", Acked: at(5.2), Resumed: at(8.5), Via: "b"}}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return !s.Tick.Before(at(6)) && s.Tick.Before(at(9)) })
	r := Check(in)
	if r.AfterPause != 0 {
		t.Fatalf("%v", r.Violations)
	}
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(6), Token: 10, Instance: "a", At: at(6.9), Line: 100})
	r = Check(in)
	if r.AfterPause != 1 || !strings.Contains(r.Violations[0].Detail, "resume sent "+at(8.5).Format(time.RFC3339Nano)) {
		t.Errorf("after-pause %d: %v; want one saying when the resume was sent", r.AfterPause, r.Violations)
	}
}

// A catch-up that the next term logged as skipped (it could not read the
// last claims) accounts for the gap, but only the next term's own: the
// same line from another instance or term does not.
func TestCheck_CatchUpSkippedByTheNextTermOnly(t *testing.T) {
	in := clean()
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.CatchUp })
	in.LastClaims = nil
	skipped := Misfire{Instance: "b", Token: 20, At: at(12.6), Reason: "catch-up skipped: reading last claimed ticks failed"}
	in.Misfires = []Misfire{skipped}
	if r := Check(in); !r.OK() {
		t.Fatalf("b's catch-up skipped: %v", r.Violations)
	}
	for _, other := range []Misfire{{Instance: "c", Token: 20}, {Instance: "b", Token: 15}} {
		m := skipped
		m.Instance, m.Token = other.Instance, other.Token
		in.Misfires = []Misfire{m}
		if r := Check(in); r.LostTicks != 2 {
			t.Errorf("skipped by %s (token %d), not b: lost %d, want 2 (ticks 11 and 12): %v", m.Instance, m.Token, r.LostTicks, r.Violations)
		}
	}
}

// The next term's catch-up tick whose claim failed accounts for the
// earlier ticks of the gap it stood for: only a line of the next term's
// instance, logged once it led, for a tick of the gap (run-all: for this
// very tick).
func TestCheck_CatchUpClaimFailed(t *testing.T) {
	in := clean()
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.CatchUp })
	in.LastClaims = nil
	failed := Misfire{Instance: "b", Token: 20, Job: "j", Tick: at(12), At: at(12.55), Reason: "run not started: claim failed"}
	in.Misfires = []Misfire{failed}
	r := Check(in)
	if !r.OK() || r.Accounted["logged: run not started: claim failed (catch-up)"] != 1 {
		t.Fatalf("b's catch-up claim of tick 12 failed: violations %v, accounted %v; want tick 11 accounted for by it", r.Violations, r.Accounted)
	}
	for _, tc := range []struct {
		name   string
		change func(m *Misfire, in *Input)
	}{
		{"logged by another instance", func(m *Misfire, _ *Input) { m.Instance = "c" }},
		{"logged before b led", func(m *Misfire, _ *Input) { m.At = at(12.3) }},
		{"for a tick after b's start", func(m *Misfire, _ *Input) { m.Tick, m.At = at(13), at(13.01) }},
		{"for a tick before the gap", func(m *Misfire, _ *Input) { m.Tick = at(10.5) }},
		{"run-all, for another tick", func(_ *Misfire, in *Input) {
			in.Jobs["j"] = Policy{Every: time.Second, Misfire: "run-all", Grace: 5 * time.Second}
		}},
	} {
		in := in
		in.Jobs = map[string]Policy{"j": in.Jobs["j"]}
		m := failed
		tc.change(&m, &in)
		in.Misfires = []Misfire{m}
		if r := Check(in); r.LostTicks == 0 {
			t.Errorf("%s: tick 11 accounted for (%v); want it lost", tc.name, r.Accounted)
		}
	}
}

// Only the live term's own instance, frozen at the tick, excuses it; a
// freeze of another instance, one that ended before the tick, or one
// that began after it (though the term ended by its SIGCONT), does not.
func TestCheck_FrozenOnlyItsOwnInstanceAtTheTick(t *testing.T) {
	for _, f := range []Interval{
		{Instance: "c", From: at(10.2), To: at(17)},
		{Instance: "a", From: at(8.2), To: at(9.5)},
		{Instance: "a", From: at(15), To: at(16.95)},
	} {
		in := frozenLeader()
		in.Frozen = []Interval{f}
		if r := Check(in); r.LostTicks == 0 {
			t.Errorf("%s frozen %v..%v: ticks 11..13 accounted for (%v); want them lost", f.Instance, f.From, f.To, r.Accounted)
		}
	}
}
