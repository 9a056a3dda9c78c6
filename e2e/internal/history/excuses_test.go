package history

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Each case is a history in which a tick was lost, that the checker
// passed while an excuse was taken at baton's word, from a line's
// absence, or without a bound. Each must be reported as a lost tick.
func TestCheck_ExcusesNeedEvidence(t *testing.T) {
	drop := func(in *Input, ticks ...float64) {
		in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool {
			for _, tk := range ticks {
				if s.Tick.Equal(at(tk)) && !s.CatchUp {
					return true
				}
			}
			return false
		})
	}
	for _, c := range []struct {
		name string
		lost float64 // the tick that must be reported
		in   func() Input
	}{
		{"catch-up stands for later ticks only", 11, func() Input {
			// b read 11 as the last claim (nobody claimed 11: a was
			// killed at 10.2 s) and says its catch-up stands for 12 on:
			// tick 11 is nobody's.
			in := clean()
			in.Starts[10].CatchUpFrom = at(12)
			in.LastClaims[0].Tick = at(11)
			return in
		}},
		{"claim read from silence", 11, func() Input {
			// c was killed at 11.03 s; b logged no line for j, so it read
			// no claim of tick 11.
			in := killedAtTheTick()
			in.LastClaims = nil
			return in
		}},
		{"still going, though the run had ended", 5, func() Input {
			// a skipped tick 5 as "still going", but its run of tick 4
			// had ended at 4.006 s.
			in := withEnds(clean())
			drop(&in, 5)
			in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(5.001), Reason: StillGoing}}
			return in
		}},
		{"still going after the pending claim was decided", 8, func() Input {
			// a admitted tick 3, whose claim failed at 7.9 s, and skipped
			// 4..9 as "still going": from tick 8 on nothing was going.
			in := withEnds(clean())
			drop(&in, 3, 4, 5, 6, 7, 8, 9)
			in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(3), At: at(7.9), Reason: "run not started: claim failed"}}
			for tk := 4; tk <= 9; tk++ {
				in.Misfires = append(in.Misfires, Misfire{Instance: "a", Token: 10, Job: "j", Tick: at(float64(tk)), At: at(float64(tk) + 0.001), Reason: StillGoing})
			}
			return in
		}},
		{"already claimed, and nobody else led", 15, func() Input {
			in := clean()
			drop(&in, 15)
			in.Misfires = []Misfire{{Instance: "b", Token: 20, Job: "j", Tick: at(15), At: at(15.002), Reason: AlreadyClaimed}}
			return in
		}},
		{"frozen, but the term outlived the freeze", 11, func() Input {
			// a was stopped from 10.2 s to 13 s and led on until 20.2 s:
			// it should have run ticks 11 and 12 on waking.
			in := clean()
			in.Terms[0].Stop = at(20.2)
			in.Terms[1].Start = at(20.5)
			in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Instance == "b" || s.Tick.Equal(at(11)) || s.Tick.Equal(at(12)) })
			for tk := 13; tk <= 20; tk++ {
				in.Starts = append(in.Starts, Start{Job: "j", Tick: at(float64(tk)), Token: 10, Instance: "a", At: at(float64(tk) + 0.001), Line: 100 + tk})
			}
			in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(20)}}
			in.Frozen = []Interval{{Instance: "a", From: at(10.2), To: at(13)}}
			return in
		}},
		{"refused as stale, and nobody caught it up", 10, func() Input {
			// a's claim of tick 10 was refused as stale at 10.01 s: b,
			// which fenced the ledger, led from 10.3 s but ran no
			// catch-up for tick 10.
			in := clean()
			in.Terms[0].Stop, in.Terms[0].Killed = at(10.02), false
			in.Terms[1].Start = at(10.3)
			in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) || s.CatchUp })
			for tk := 11; tk <= 12; tk++ {
				in.Starts = append(in.Starts, Start{Job: "j", Tick: at(float64(tk)), Token: 20, Instance: "b", At: at(float64(tk) + 0.001), Line: 90 + tk})
			}
			in.LastClaims[0].Tick = at(9)
			in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(10), At: at(10.01), Reason: StaleRefused}}
			return in
		}},
		{"still going, though its process had been killed", 13, func() Input {
			// a's run of tick 10 wrote no end line: a was killed at 10.2
			// s. a, restarted, led again from 12.5 s (token 20) and
			// skipped tick 13 as "still going".
			in := withEnds(clean())
			in.Ends = slices.DeleteFunc(in.Ends, func(e End) bool { return e.Tick.Equal(at(10)) })
			in.Terms[1].Instance = "a"
			for i := range in.Starts {
				if in.Starts[i].Token == 20 {
					in.Starts[i].Instance = "a"
				}
			}
			for i := range in.Ends {
				if in.Ends[i].Token == 20 {
					in.Ends[i].Instance = "a"
				}
			}
			in.LastClaims[0].Instance = "a"
			drop(&in, 13)
			in.Misfires = []Misfire{{Instance: "a", Token: 20, Job: "j", Tick: at(13), At: at(13.001), Reason: StillGoing}}
			return in
		}},
		{"still going, with no claim before the term began", 13, func() Input {
			// b led from 12.5 s, ran no catch-up, and skipped tick 13 as
			// "still going": its term had no earlier tick to claim.
			in := withEnds(clean())
			in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.CatchUp })
			in.Ends = slices.DeleteFunc(in.Ends, func(e End) bool { return e.Token == 20 && e.Tick.Equal(at(12)) })
			in.LastClaims[0].Tick = at(12) // b read 12: nothing missed
			drop(&in, 13)
			in.Misfires = []Misfire{{Instance: "b", Token: 20, Job: "j", Tick: at(13), At: at(13.001), Reason: StillGoing}}
			return in
		}},
		{"still going, as a catch-up run pending that b's read of the claims did not plan", 13, func() Input {
			// As pendingCatchUp, but b read 12 as the last claim: it
			// had no catch-up run to wait for.
			in := pendingCatchUp()
			in.LastClaims[0].Tick = at(12)
			return in
		}},
		{"still going, as a run-once catch-up of a tick it does not take", 13, func() Input {
			// As pendingCatchUp, but b's catch-up run of 12 failed its
			// claim before the skip: tick 11, which its one run stands
			// for but does not take, was never a run of its own.
			in := pendingCatchUp()
			in.Misfires[1].Reason, in.Misfires[1].At = "run not started: claim failed", at(12.9)
			return in
		}},
		{"still going, as another job's catch-up run", 13, func() Input {
			// As the case before, with a catch-up run of job k (tick 11)
			// started by b: not j's.
			in := pendingCatchUp()
			in.Misfires[1].Reason, in.Misfires[1].At = "run not started: claim failed", at(12.9)
			in.Starts = append(in.Starts, Start{Job: "k", Tick: at(11), Token: 20, Instance: "b", At: at(12.51), CatchUp: true, CatchUpFrom: at(11), Line: 300})
			return in
		}},
		{"still going, as a catch-up run pending, with no claim of the job yet", 13, func() Input {
			// b read that the ledger held no claim of j: no catch-up.
			in := pendingCatchUp()
			in.LastClaims[0].Tick = time.Time{}
			return in
		}},
		{"still going, as a catch-up run pending, under the skip policy", 13, func() Input {
			// A job that skips missed ticks has no catch-up run.
			in := pendingCatchUp()
			in.Jobs = map[string]Policy{"j": {Every: time.Second, Misfire: "skip"}}
			return in
		}},
		{"still going, as a catch-up run pending, with no read of the claims", 13, func() Input {
			in := pendingCatchUp()
			in.LastClaims = in.LastClaims[1:]
			return in
		}},
		{"a catch-up does not stand for ticks after its own", 14, func() Input {
			// b's catch-up ran tick 12 (from 11); b's loop lost tick 14.
			in := clean()
			drop(&in, 14)
			return in
		}},
		{"killed with a claim in flight past its timeout", 10, func() Input {
			// a was killed 0.6 s after tick 10, which it never started; a
			// claim gives up after 0.5 s here.
			in := clean()
			in.ClaimTimeout = 500 * time.Millisecond
			in.Terms[0].Stop = at(10.6)
			drop(&in, 10)
			return in
		}},
		{"term over long after its loop should have begun", 12, func() Input {
			// c led from 10.5 s to 12.3 s and ran nothing; with 0.5 s
			// claims its loop began by 11.6 s: tick 12 was c's.
			in := termOverBeforeItsLoop()
			in.ClaimTimeout = 500 * time.Millisecond
			return in
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.in())
			want := "tick " + at(c.lost).Format(time.RFC3339Nano) + ":"
			if !slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Kind == "lost-tick" && strings.Contains(v.Detail, want) }) {
				t.Errorf("tick %v not reported lost; accounted %v, violations %v", c.lost, r.Accounted, r.Violations)
			}
		})
	}
}

// withEnds gives every run of in an end line 5 ms after its start.
func withEnds(in Input) Input {
	for _, s := range in.Starts {
		in.Ends = append(in.Ends, End{Job: s.Job, Tick: s.Tick, Token: s.Token, Instance: s.Instance, At: s.At.Add(5 * time.Millisecond)})
	}
	return in
}

// pendingCatchUp is clean() where b's term (from 12.5 s) read 10 as the
// job's last claim, admitted its catch-up run of tick 12, skipped tick 13
// as "still going" while that run's claim was pending, and lost its term
// at 13.5 s before the run started; c, from 14.5 s, read 12 as the last
// claim (b's had landed) and its catch-up run of 14 stands for 13 on (a
// CI fault run on PostgreSQL HA, under 234 ms of latency per chunk).
func pendingCatchUp() Input {
	in := withEnds(clean())
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 20 })
	in.Ends = slices.DeleteFunc(in.Ends, func(e End) bool { return e.Token == 20 })
	in.Terms[1].Stop = at(13.5)
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 30, Start: at(14.5)})
	in.Misfires = []Misfire{
		{Instance: "b", Token: 20, Job: "j", Tick: at(13), At: at(13.001), Reason: StillGoing},
		{Instance: "b", Token: 20, Job: "j", Tick: at(12), At: at(13.6), Reason: "run not started: term over"},
	}
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(14), Token: 30, Instance: "c", At: at(14.51), CatchUp: true, CatchUpFrom: at(13), Line: 200})
	in.Ends = append(in.Ends, End{Job: "j", Tick: at(14), Token: 30, Instance: "c", At: at(14.52)})
	for tk := 15; tk <= 20; tk++ {
		in.Starts = append(in.Starts, Start{Job: "j", Tick: at(float64(tk)), Token: 30, Instance: "c", At: at(float64(tk) + 0.001), Line: 200 + tk})
		in.Ends = append(in.Ends, End{Job: "j", Tick: at(float64(tk)), Token: 30, Instance: "c", At: at(float64(tk) + 0.005)})
	}
	in.LastClaims = append(in.LastClaims, LastClaim{Instance: "c", Token: 30, Job: "j", Tick: at(12)})
	return in
}

// The evidence each excuse needs, present: the same histories pass.
func TestCheck_ExcusesWithEvidencePass(t *testing.T) {
	// a's run of tick 4 lasted until 5.5 s: tick 5 was skipped with cause.
	in := clean()
	in.Ends = []End{{Job: "j", Tick: at(4), Token: 10, Instance: "a", At: at(5.5)}}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(5)) })
	in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(5.001), Reason: StillGoing}}
	if r := Check(in); !r.OK() {
		t.Errorf("run still going: %v", r.Violations)
	}
	// a's claim of tick 5 was asked again until 7.9 s, when its run
	// started: ticks 6 and 7 were skipped while it was pending (a soak's
	// consul-cluster leader, whose claims met 500s for 3.9 s).
	in = withEnds(clean())
	for i := range in.Starts {
		if in.Starts[i].Tick.Equal(at(5)) {
			in.Starts[i].At = at(7.9)
		}
	}
	for i := range in.Ends {
		if in.Ends[i].Tick.Equal(at(5)) {
			in.Ends[i].At = at(7.95)
		}
	}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(6)) || s.Tick.Equal(at(7)) })
	in.Asked = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(5.1)}}
	in.Misfires = []Misfire{
		{Instance: "a", Token: 10, Job: "j", Tick: at(6), At: at(6.001), Reason: StillGoing},
		{Instance: "a", Token: 10, Job: "j", Tick: at(7), At: at(7.001), Reason: StillGoing},
	}
	if r := Check(in); r.LostTicks != 0 {
		t.Errorf("skips while tick 5's claim was pending: %v", r.Violations)
	}
	// b led from 12.5 s; its catch-up run of tick 12 (from 11) was
	// admitted at once and started at 13.2 s, after b skipped tick 13 as
	// "still going" (a soak's postgres leader under load).
	in = withEnds(clean())
	for i := range in.Starts {
		if in.Starts[i].CatchUp {
			in.Starts[i].At = at(13.2)
		}
	}
	for i := range in.Ends {
		if in.Ends[i].Token == 20 && in.Ends[i].Tick.Equal(at(12)) {
			in.Ends[i].At = at(13.3)
		}
	}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(13)) })
	in.Misfires = []Misfire{{Instance: "b", Token: 20, Job: "j", Tick: at(13), At: at(13.001), Reason: StillGoing}}
	if r := Check(in); r.LostTicks != 0 {
		t.Errorf("skip while the catch-up's claim was pending: %v", r.Violations)
	}
	// b skipped tick 13 while its catch-up run of 12, admitted, never
	// started: its claim was pending at the skip.
	if r := Check(pendingCatchUp()); !r.OK() {
		t.Errorf("skip while the catch-up's run, never started, was pending: %v", r.Violations)
	}
	// a's claim of tick 10 was refused as stale; b's catch-up covers it.
	in = clean()
	in.Terms[0].Stop, in.Terms[0].Killed = at(10.02), false
	in.Terms[1].Start = at(10.3)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Compare(at(10)) >= 0 && s.Tick.Compare(at(12)) <= 0 })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(10), Token: 20, Instance: "b", At: at(10.31), CatchUp: true, CatchUpFrom: at(10), Line: 90},
		Start{Job: "j", Tick: at(11), Token: 20, Instance: "b", At: at(11.001), Line: 91},
		Start{Job: "j", Tick: at(12), Token: 20, Instance: "b", At: at(12.001), Line: 92})
	in.LastClaims[0].Tick = at(9)
	in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(10), At: at(10.01), Reason: StaleRefused}}
	if r := Check(in); !r.OK() {
		t.Errorf("refused as stale, caught up: %v", r.Violations)
	}
}

// A job no term had claimed yet has no catch-up for the ticks before the
// next term: accounted for only if that term logged that it read no claim
// and the records hold no run of the job before.
func TestCheck_NeverClaimedJob(t *testing.T) {
	in := clean()
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Instance == "a" || s.CatchUp })
	in.Terms[0].Stop = at(0.9) // a led before the job's first tick
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j"}}
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(12), Token: 20, Instance: "b", At: at(12.51), Line: 90})
	if r := Check(in); !r.OK() {
		t.Errorf("no claim before b: %v", r.Violations)
	}
	// Without b's line, or with a run of the job before, the ticks are lost.
	in.LastClaims = nil
	if r := Check(in); r.LostTicks == 0 {
		t.Error("no line from b: no lost tick")
	}
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j"}}
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(1), Token: 10, Instance: "a", At: at(1.001), Line: 91})
	in.Terms[0].Stop = at(1.2)
	if r := Check(in); r.LostTicks == 0 {
		t.Error("a ran tick 1, yet b said none claimed: no lost tick")
	}
}

// A claim asked again during a partition may have landed on its first
// attempt, and then been refused as stale: if the next term read it as
// the last claim, the tick ran nowhere, at most once (CI's consul-cluster
// leader cut off from its servers as its lease ran out).
func TestCheck_RefusedAsStaleAfterItLanded(t *testing.T) {
	in := clean()
	in.Terms[0].Stop, in.Terms[0].Killed = at(10.3), false
	in.Terms[1].Start = at(12.5)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) })
	in.Starts[len(in.Starts)-9].CatchUpFrom = at(11) // b's catch-up of 12, from 11
	in.LastClaims[0].Tick = at(10)
	in.Asked = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(10), At: at(10.1)}}
	in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(10), At: at(10.3), Reason: StaleRefused}}
	if r := Check(in); !r.OK() {
		t.Errorf("refused as stale, b read tick 10 as claimed: %v", r.Violations)
	}
	in.LastClaims[0].Tick = at(9) // the claim never landed, and b did not cover 10
	if r := Check(in); r.LostTicks == 0 {
		t.Error("refused as stale, b read 9 and ran no catch-up for 10: no lost tick")
	}
}
