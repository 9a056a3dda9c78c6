package history

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Which term was live at a tick, and which came next: the cases below pin
// the bounds the tick accounting uses (make mutate found them unguarded).

// lostAt reports whether r reports tick sec of job j lost.
func lostAt(r Report, sec float64) bool {
	want := "tick " + at(sec).Format(time.RFC3339Nano) + ":"
	return slices.ContainsFunc(r.Violations, func(v Violation) bool {
		return v.Kind == "lost-tick" && strings.Contains(v.Detail, want)
	})
}

// A term that stepped down fires no tick after its step-down, though it
// holds its lease through the drain: a tick in between is the next
// term's to catch up, not the stepped-down term's to explain.
func TestCheck_SteppedDownTermFiresNoTick(t *testing.T) {
	// a stepped down at 10.2 s and released at 12.4 s; b's catch-up of
	// tick 12 stands for 11 too.
	in := clean()
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), End: at(12.4), SteppedDown: true, Graceful: true}
	if r := Check(in); !r.OK() {
		t.Errorf("tick 11 between a's step-down and its release, covered by b's catch-up: %v", r.Violations)
	}
}

// A term superseded by a later one is live only until that one began,
// even if it learned of its loss later (frozen): a tick after that is the
// later term's to run or explain.
func TestCheck_SupersededTermIsNotLive(t *testing.T) {
	in := clean()
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(14.05), Lost: at(14.05)}
	in.Frozen = []Interval{{Instance: "a", From: at(10.2), To: at(14)}}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(13)) })
	r := Check(in)
	if !lostAt(r, 13) {
		t.Errorf("b led at tick 13 and neither ran it nor logged why: not reported; accounted %v, violations %v", r.Accounted, r.Violations)
	}
}

// With nobody leading after a tick, the tick is accounted for as such,
// whether or not a live term had an excuse for it.
func TestCheck_NobodyLeadsAfter(t *testing.T) {
	in := clean()
	in.Terms = in.Terms[:1]
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 20 || s.Tick.Equal(at(10)) })
	in.LastClaims = nil
	in.Asked = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(10), At: at(10.1)}}
	r := Check(in)
	if !r.OK() {
		t.Fatalf("a killed with tick 10's claim in flight, nobody after: %v", r.Violations)
	}
	if r.Accounted["claim in flight when its instance was killed, no later term"] != 1 || r.Accounted["no later term"] != 10 {
		t.Errorf("accounted %v, want tick 10 as in flight with no later term, 11..20 as no later term", r.Accounted)
	}
}

// A lost tick while a frozen term was live names the frozen instance.
func TestCheck_LostWhileFrozenSaysSo(t *testing.T) {
	in := frozenLeader()
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.CatchUp })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(14), Token: 20, Instance: "b", At: at(14.51), CatchUp: true, CatchUpFrom: at(14), Line: 50})
	r := Check(in)
	if !lostAt(r, 12) {
		t.Fatalf("tick 12 not reported lost: %v", r.Violations)
	}
	for _, v := range r.Violations {
		if strings.Contains(v.Detail, at(12).Format(time.RFC3339Nano)) && !strings.Contains(v.Detail, "a (term 10) was frozen") {
			t.Errorf("violation does not say a was frozen: %s", v.Detail)
		}
	}
}

// The term that must read the claim is the first after the tick, though
// it was killed in its catch-up: here it read tick 10 as claimed, and the
// term after it read no claim of the job.
func TestCheck_NextIsTheFirstTermAfter(t *testing.T) {
	in := clean()
	in.Asked = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(10), At: at(10.1)}}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) })
	in.Terms = []Term{in.Terms[0], {Instance: "c", Token: 15, Start: at(10.5), Stop: at(10.6), Killed: true}, in.Terms[1]}
	in.LastClaims = []LastClaim{{Instance: "c", Token: 15, Job: "j", Tick: at(10)}}
	if r := Check(in); !r.OK() {
		t.Errorf("c, first after tick 10, read it as claimed: %v", r.Violations)
	}
	in.LastClaims[0].Tick = at(9)
	if r := Check(in); !lostAt(r, 10) {
		t.Errorf("c read 9: tick 10 not reported lost: %v", r.Violations)
	}
}

// A freeze counts for the frozen instance's term, at the ticks it covers.
func TestCheck_FreezeOfAnotherInstance(t *testing.T) {
	in := frozenLeader()
	in.Frozen[0].Instance = "c"
	if r := Check(in); !lostAt(r, 12) {
		t.Errorf("c was frozen, not a: tick 12 not reported lost: %v", r.Violations)
	}
}

// A term killed while frozen ended by the SIGCONT, though no later term
// had begun by then: its missed ticks are the next term's.
func TestCheck_KilledWhileFrozen(t *testing.T) {
	in := clean()
	in.Terms[0].Stop = at(16)
	in.Frozen = []Interval{{Instance: "a", From: at(10.2), To: at(16)}}
	in.Terms[1].Start = at(17.5)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 20 && !s.Tick.After(at(17)) })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(17), Token: 20, Instance: "b", At: at(17.51), CatchUp: true, CatchUpFrom: at(13), Line: 90})
	if r := Check(in); !r.OK() {
		t.Errorf("a killed while frozen, b's catch-up of 17 from 13: %v", r.Violations)
	}
}

// The grace is judged with the slack taken off, and no further: a next
// term that began exactly at grace less slack after the tick must still
// account for it.
func TestCheck_GraceBoundary(t *testing.T) {
	in := clean()
	in.Terms[1].Start = at(11 + 4.9)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 20 && !s.Tick.After(at(15)) })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(15), Token: 20, Instance: "b", At: at(15.91), CatchUp: true, CatchUpFrom: at(12), Line: 90})
	if r := Check(in); !lostAt(r, 11) {
		t.Errorf("b began 4.9 s after tick 11 (grace 5 s, slack 100 ms) and did not cover it: not reported lost: %v", r.Violations)
	}
	in.Terms[1].Start = at(11 + 4.9 + 1e-6)
	if r := Check(in); lostAt(r, 11) {
		t.Errorf("b began beyond grace less slack: tick 11 reported lost: %v", r.Violations)
	}
}

// The term killed at the tick is the last to begin before it, whatever
// terms come after.
func TestCheck_ClaimedByKilledWithLaterTerms(t *testing.T) {
	in := clean()
	in.Terms[0].Stop = at(10.05)
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 30, Start: at(30)})
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) && !s.CatchUp })
	if r := Check(in); !r.OK() {
		t.Errorf("a killed 50 ms after claiming tick 10, b read it: %v", r.Violations)
	}
}

// A term that ended before it decided anything is passed over, whatever
// the same instance did in its other terms.
func TestCheck_EmptyTermOfABusyInstance(t *testing.T) {
	in := clean()
	in.Terms[0].Stop = at(9.95)
	in.Terms = []Term{in.Terms[0], {Instance: "a", Token: 15, Start: at(10.5), Stop: at(10.6)}, in.Terms[1]}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) && !s.CatchUp })
	in.Starts[len(in.Starts)-9].CatchUpFrom = at(10)
	in.LastClaims[0].Tick = at(9)
	// a logged why it did not start tick 5 in its first term.
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(5)) })
	in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(5.01), Reason: "run not started: claim failed"}}
	if r := Check(in); !r.OK() {
		t.Errorf("a's second term decided nothing; b's catch-up covers tick 10: %v", r.Violations)
	}
}

// A term killed in its catch-up is passed over to the term after it,
// which read its claim, whatever the same instance ran in other terms.
func TestCheck_KilledInCatchUpOfABusyInstance(t *testing.T) {
	in := clean()
	in.Terms[0].Stop = at(9.5)
	in.Terms = []Term{in.Terms[0], {Instance: "a", Token: 15, Start: at(10.5), Stop: at(10.6), Killed: true}, in.Terms[1]}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) && !s.CatchUp })
	if r := Check(in); !r.OK() {
		t.Errorf("a's second term killed in its catch-up, b read tick 10 as claimed: %v", r.Violations)
	}
}

// A term that began within the slack before a tick, ran its loop, and
// was killed within the slack after it may have claimed the tick: the
// term after it, which read the claim, accounts for it.
func TestCheck_KilledJustAfterTheTick(t *testing.T) {
	in := withOther(clean())
	in.Terms[0].Stop = at(9.8)
	in.Terms = []Term{in.Terms[0], {Instance: "c", Token: 15, Start: at(9.95), Stop: at(10.05), Killed: true}, in.Terms[1]}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) && !s.CatchUp })
	in.Starts = append(in.Starts, Start{Job: "k", Tick: at(10), Token: 15, Instance: "c", At: at(10.001), Line: 90})
	if r := Check(in); !r.OK() {
		t.Errorf("c killed 50 ms after tick 10, b read it as claimed: %v", r.Violations)
	}
}

// A term that began at the tick and was frozen just after is live at it:
// frozen, then the next term's catch-up accounts for it, as for a term
// that began within the slack before it.
func TestCheck_TermFrozenAsItBeganAtTheTick(t *testing.T) {
	in := clean()
	in.Terms[0].Stop = at(10.2)
	in.Terms = []Term{in.Terms[0], {Instance: "c", Token: 15, Start: at(11), Stop: at(13.9), Lost: at(13.9)}, in.Terms[1]}
	in.Terms[2].Start = at(14)
	in.Frozen = []Interval{{Instance: "c", From: at(11.03), To: at(13.9)}}
	in.Misfires = []Misfire{{Instance: "c", Token: 15, Job: "j", Tick: at(12), At: at(11.02), Reason: "run not started: claim failed"}}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 20 && !s.Tick.After(at(14)) })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(14), Token: 20, Instance: "b", At: at(14.01), CatchUp: true, CatchUpFrom: at(11), Line: 90})
	if r := Check(in); !r.OK() {
		t.Errorf("c began at tick 11 and was frozen 30 ms later; b's catch-up covers it: %v", r.Violations)
	}
}

// A term that began just before a tick (within the slack) and ended
// before its schedule loop began (its catch-up's claims failed on a
// restarted backend) did not fire the ticks after its start; it said so
// ("ticks not fired") and its records agree. The term after it accounts
// for them. The soak saw it: postgres-ha, term 3774, tick 07:46:45.
func TestCheck_TermOverBeforeItsLoopPassesTheTickOn(t *testing.T) {
	// a is killed at 10.2 s; c leads at 10.95 s, its catch-up's claim of
	// tick 10 fails, and it ends at 12 s before its loop began; b leads at
	// 12.5 s and its catch-up (tick 12, from 11) covers tick 11.
	base := func() Input {
		in := clean()
		in.Terms = []Term{in.Terms[0], {Instance: "c", Token: 15, Start: at(10.95), Stop: at(12), Lost: at(12), End: at(12.01)}, in.Terms[1]}
		in.Terms[0].Stop = at(10.05)
		in.Misfires = []Misfire{{Instance: "c", Token: 15, Job: "j", Tick: at(10), At: at(11.5), Reason: "run not started: claim failed"}}
		in.NotFired = []NotFired{{Instance: "c", Token: 15, Job: "j", First: at(11), Until: at(12)}}
		return in
	}
	in := base()
	if r := Check(in); !r.OK() || r.Accounted["term over before its schedule loop began, then catch-up"] != 1 {
		t.Errorf("violations %v, accounted %v; want tick 11 passed on to b's catch-up", r.Violations, r.Accounted)
	}
	for _, tc := range []struct {
		name string
		edit func(*Input)
	}{
		{"c said nothing", func(in *Input) { in.NotFired = nil }},
		{"c's line is of another job", func(in *Input) { in.NotFired[0].Job = "k" }},
		{"c's line leaves tick 11 out", func(in *Input) { in.NotFired[0].First = at(12) }},
		{"c's term still live", func(in *Input) {
			in.Terms[1].Stop, in.Terms[1].Lost, in.Terms[1].End = time.Time{}, time.Time{}, time.Time{}
		}},
		{"c's loop ran", func(in *Input) {
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(11.5), Token: 15, Instance: "c", At: at(11.5), Line: 90})
		}},
		{"b's catch-up does not stand for tick 11", func(in *Input) {
			for i := range in.Starts {
				if in.Starts[i].CatchUp {
					in.Starts[i].CatchUpFrom = at(12)
				}
			}
		}},
	} {
		in := base()
		tc.edit(&in)
		if r := Check(in); !lostAt(r, 11) {
			t.Errorf("%s: tick 11 not reported lost: %v, accounted %v", tc.name, r.Violations, r.Accounted)
		}
	}
}

// A term frozen across a tick and killed just after it woke: on waking
// its loop fired the tick late and claimed it, and the kill landed
// before the run started. The 60-minute kube soak of 2026-11-29 (lane 2)
// found it: node-3-46 (term 236) was stopped from 21:05:17.402 to
// 19.439, claimed drain's tick 18 and tick's on waking, started tick's
// at 19.521 and was killed at 19.551, 112 ms after the SIGCONT; term 237
// read drain's last claim as 18. At most once: nobody runs it. Killed
// while still frozen, or with the claim not read, it is lost.
func TestCheck_KilledAsItWokeWithTheTickClaimed(t *testing.T) {
	frozenThenKilled := func() Input {
		in := clean()
		in.Terms[0].Stop = at(10.65)
		in.Frozen = []Interval{{Instance: "a", From: at(9.6), To: at(10.6)}}
		in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) })
		return in
	}
	r := Check(frozenThenKilled())
	if !r.OK() {
		t.Fatalf("a woke at 10.6, was killed at 10.65, b read tick 10 as claimed: %v", r.Violations)
	}
	if n := r.Accounted["frozen, then killed as it woke (the claim landed)"]; n != 1 {
		t.Errorf("accounted %v, want tick 10 as frozen, then killed as it woke", r.Accounted)
	}
	for _, tc := range []struct {
		name string
		edit func(*Input)
	}{
		{"b read an earlier claim", func(in *Input) { in.LastClaims[0].Tick = at(9) }},
		{"killed while still frozen", func(in *Input) { in.Terms[0].Stop = at(10.3) }},
		{"its lease lost at the wake, not killed", func(in *Input) { in.Terms[0].Killed = false }},
		{"killed past the slack after a wake b had begun before", func(in *Input) {
			in.Terms[0].Stop = at(10.9)
			in.Terms[1].Start = at(10.55)
		}},
	} {
		in := frozenThenKilled()
		tc.edit(&in)
		if r := Check(in); !lostAt(r, 10) {
			t.Errorf("%s: tick 10 not reported lost: %v", tc.name, r.Violations)
		}
	}
}
