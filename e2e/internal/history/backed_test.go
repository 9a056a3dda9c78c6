package history

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Whose records back an excuse: the run, the term, the claim and the line
// an excuse rests on must be the job's and the term's own. Each case
// below is a lost tick that an excuse matched to someone else's record
// would hide (make mutate found these matches unguarded).

// withOther adds job k, whose ticks are not judged (no fixed period), to
// in: its records can only ever back k's excuses.
func withOther(in Input) Input {
	in.Jobs["k"] = Policy{}
	return in
}

func TestCheck_ExcusesRestOnTheirOwnRecords(t *testing.T) {
	drop := func(in *Input, ticks ...float64) {
		in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool {
			return !s.CatchUp && s.Job == "j" && slices.ContainsFunc(ticks, func(tk float64) bool { return s.Tick.Equal(at(tk)) })
		})
	}
	// inFlight is a lost tick 10: a was killed at 11.5 s, past the job's
	// next tick, having started neither 10 nor 11; b read 10 as claimed.
	inFlight := func() Input {
		in := withOther(clean())
		in.Terms[0].Stop = at(11.5)
		drop(&in, 10)
		return in
	}
	for _, c := range []struct {
		name string
		lost float64
		in   func() Input
	}{
		{"still going: another job's run was going", 5, func() Input {
			// k's run on a, of tick 5, had not ended; j's run of 4 had.
			in := withEnds(withOther(clean()))
			in.Starts = append(in.Starts, Start{Job: "k", Tick: at(5), Token: 10, Instance: "a", At: at(5.0005), Line: 90})
			drop(&in, 5)
			in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(5.001), Reason: StillGoing}}
			return in
		}},
		{"still going: another instance's run was going", 5, func() Input {
			// b's run of j, in a term before a's, never ended; a's had.
			in := withEnds(clean())
			in.Terms = append([]Term{{Instance: "b", Token: 5, Start: at(-1), Stop: at(0.3), Lost: at(0.3)}}, in.Terms...)
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(0), Token: 5, Instance: "b", At: at(0.002), Line: 90})
			drop(&in, 5)
			in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(5.001), Reason: StillGoing}}
			return in
		}},
		{"still going: an earlier run had not ended, the latest had", 5, func() Input {
			in := withEnds(clean())
			in.Ends = slices.DeleteFunc(in.Ends, func(e End) bool { return e.Tick.Equal(at(1)) })
			drop(&in, 5)
			in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(5.001), Reason: StillGoing}}
			return in
		}},
		{"still going: the run's process had been killed", 11, func() Input {
			// a's run of tick 10 wrote no end: a was killed at 10.2 s.
			// Restarted, a led again from 10.8 s and skipped tick 11.
			in := withEnds(clean())
			in.Ends = slices.DeleteFunc(in.Ends, func(e End) bool { return e.Tick.Equal(at(10)) })
			in.Terms[1] = Term{Instance: "a", Token: 20, Start: at(10.8)}
			in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 20 })
			in.Ends = slices.DeleteFunc(in.Ends, func(e End) bool { return e.Token == 20 })
			for tk := 12; tk <= 20; tk++ {
				in.Starts = append(in.Starts, Start{Job: "j", Tick: at(float64(tk)), Token: 20, Instance: "a", At: at(float64(tk) + 0.001), Line: 100 + tk})
			}
			in.LastClaims = []LastClaim{{Instance: "a", Token: 20, Job: "j", Tick: at(10)}}
			in.Misfires = []Misfire{{Instance: "a", Token: 20, Job: "j", Tick: at(11), At: at(11.001), Reason: StillGoing}}
			return in
		}},
		{"still going: no term of that token", 5, func() Input {
			in := withEnds(clean())
			drop(&in, 5)
			in.Misfires = []Misfire{{Instance: "a", Token: 7, Job: "j", Tick: at(5), At: at(5.001), Reason: StillGoing}}
			return in
		}},
		{"in flight: another job's claim was asked again", 10, func() Input {
			in := inFlight()
			in.Asked = []Misfire{{Instance: "a", Token: 10, Job: "k", Tick: at(10), At: at(10.1)}}
			return in
		}},
		{"in flight: another term's claim was asked again", 10, func() Input {
			in := inFlight()
			in.Asked = []Misfire{{Instance: "c", Token: 15, Job: "j", Tick: at(10), At: at(10.1)}}
			return in
		}},
		{"in flight: the instance's earlier term asked again", 10, func() Input {
			in := inFlight()
			in.Asked = []Misfire{{Instance: "a", Token: 5, Job: "j", Tick: at(10), At: at(10.1)}}
			return in
		}},
		{"in flight: another term skipped the next tick", 10, func() Input {
			// No end lines: a run not known to have ended backs a skip.
			in := inFlight()
			in.Misfires = []Misfire{{Instance: "a", Token: 5, Job: "j", Tick: at(11), At: at(11.001), Reason: StillGoing}}
			return in
		}},
		{"catch-up: another job's catch-up", 11, func() Input {
			// b ran k's catch-up of 12 from 11, and none of j's.
			in := withOther(clean())
			for i := range in.Starts {
				if in.Starts[i].CatchUp {
					in.Starts[i].Job = "k"
				}
			}
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(12), Token: 20, Instance: "b", At: at(12.52), Line: 90})
			return in
		}},
		{"never claimed: another job's line", 11, func() Input {
			in := neverClaimedJob()
			in.LastClaims[0].Job = "k"
			return withOther(in)
		}},
		{"never claimed: another term's line", 11, func() Input {
			in := neverClaimedJob()
			in.LastClaims[0].Token = 10
			return in
		}},
		{"never claimed: another instance's line", 11, func() Input {
			in := neverClaimedJob()
			in.LastClaims[0].Instance = "a"
			return in
		}},
		{"term stopping: the instance's earlier term had stopped", 15, func() Input {
			// b led before a and stopped at 0.3 s; its next term, from
			// 12.5 s, was live when it said it was stopping.
			in := clean()
			in.Terms = append([]Term{{Instance: "b", Token: 5, Start: at(-1), Stop: at(0.3), Lost: at(0.3)}}, in.Terms...)
			drop(&in, 15)
			in.Misfires = []Misfire{{Instance: "b", Token: 20, Job: "j", Tick: at(15), At: at(15.001), Reason: TermStopping}}
			return in
		}},
		{"still going: a silent tick past its pre-start bound", 25, func() Input {
			// b's loop ran tick 13 and said nothing of 14..19; it logged
			// its claims of 20..24 as failed, and skipped 25 as still
			// going. 14..19 were admitted more than the claim timeout
			// (no pause read) before the skip: none was in flight.
			in := withEnds(clean())
			in.To = at(26)
			in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 20 && s.Tick.After(at(13)) })
			in.Ends = slices.DeleteFunc(in.Ends, func(e End) bool { return e.Token == 20 && e.Tick.After(at(13)) })
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(26), Token: 20, Instance: "b", At: at(26.001), Line: 90})
			for tk := 20.0; tk <= 24; tk++ {
				in.Misfires = append(in.Misfires, Misfire{Instance: "b", Token: 20, Job: "j", Tick: at(tk), At: at(tk + 0.5), Reason: "run not started: claim failed"})
			}
			in.Misfires = append(in.Misfires, Misfire{Instance: "b", Token: 20, Job: "j", Tick: at(25), At: at(25.001), Reason: StillGoing})
			return in
		}},
		{"never claimed: it read a claim", 11, func() Input {
			in := neverClaimedJob()
			in.LastClaims[0].Tick = at(-5)
			return in
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if r := Check(c.in()); !lostAt(r, c.lost) {
				t.Errorf("tick %v not reported lost; accounted %v, violations %v", c.lost, r.Accounted, r.Violations)
			}
		})
	}
}

// neverClaimedJob is TestCheck_NeverClaimedJob's history: a led before
// the job's first tick, b logged that it found no claim of j and ran no
// catch-up; ticks 8..11, within the grace, are accounted for by b's
// line alone.
func neverClaimedJob() Input {
	in := clean()
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Instance == "a" || s.CatchUp })
	in.Terms[0].Stop = at(0.9)
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j"}}
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(12), Token: 20, Instance: "b", At: at(12.51), Line: 90})
	return in
}

// The same excuses, matched to the right records, pass.
func TestCheck_ExcusesOnTheirOwnRecordsPass(t *testing.T) {
	// A legitimate skip (a's run of 4 went on to 5.5 s), with an earlier
	// term of a's, killed, in the history.
	in := clean()
	in.Terms = append([]Term{{Instance: "a", Token: 5, Start: at(-1), Stop: at(0.2), Killed: true}}, in.Terms...)
	in.Ends = []End{{Job: "j", Tick: at(4), Token: 10, Instance: "a", At: at(5.5)}}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(5)) })
	in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(5.001), Reason: StillGoing}}
	if r := Check(in); !r.OK() {
		t.Errorf("run of 4 still going, a killed in an earlier term: %v", r.Violations)
	}
	// Skips while a's claim of 5 was pending (asked again, started at
	// 7.9 s), with a's later term (restarted, token 20) in the history.
	in = clean()
	in.Terms[1].Instance = "a"
	for i := range in.Starts {
		if in.Starts[i].Token == 20 {
			in.Starts[i].Instance = "a"
		}
		if in.Starts[i].Tick.Equal(at(5)) {
			in.Starts[i].At = at(7.9)
		}
	}
	in.LastClaims[0].Instance = "a"
	in = withEnds(in)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(6)) || s.Tick.Equal(at(7)) })
	in.Asked = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(5.1)}}
	in.Misfires = []Misfire{
		{Instance: "a", Token: 10, Job: "j", Tick: at(6), At: at(6.001), Reason: StillGoing},
		{Instance: "a", Token: 10, Job: "j", Tick: at(7), At: at(7.001), Reason: StillGoing},
	}
	if r := Check(in); !r.OK() {
		t.Errorf("skips while tick 5's claim was pending, a's later term in the history: %v", r.Violations)
	}
}

// "Already claimed" needs an earlier claimant live at the tick: c, with
// a lower token, led until it was killed just after tick 15, and b, which
// had taken over, found 15 claimed.
func TestCheck_AlreadyClaimedByAnEarlierTerm(t *testing.T) {
	in := clean()
	in.Terms = []Term{in.Terms[0], {Instance: "c", Token: 15, Start: at(10.5), Stop: at(15.05), Killed: true}, {Instance: "b", Token: 20, Start: at(14.95)}}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 20 && !s.Tick.After(at(15)) })
	for tk := 11; tk <= 14; tk++ {
		in.Starts = append(in.Starts, Start{Job: "j", Tick: at(float64(tk)), Token: 15, Instance: "c", At: at(float64(tk) + 0.001), Line: 80 + tk})
	}
	in.LastClaims = []LastClaim{{Instance: "c", Token: 15, Job: "j", Tick: at(10)}, {Instance: "b", Token: 20, Job: "j", Tick: at(14)}}
	in.Misfires = []Misfire{{Instance: "b", Token: 20, Job: "j", Tick: at(15), At: at(15.002), Reason: AlreadyClaimed}}
	r := Check(in)
	if !r.OK() || r.Accounted["logged: "+AlreadyClaimed] != 1 {
		t.Errorf("tick 15 claimed by c: violations %v, accounted %v", r.Violations, r.Accounted)
	}
	// c began after the refusal: it could not have claimed 15 before b.
	in.Terms[1].Start = at(15.01)
	if r := Check(in); !lostAt(r, 15) {
		t.Errorf("c began after b's refusal: tick 15 not reported lost: %v", r.Violations)
	}
}

// An outside-term violation names the term's bounds, "open" where there
// is none.
func TestCheck_OutsideTermNamesTheBounds(t *testing.T) {
	in := clean()
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(10), Token: 10, Instance: "a", At: at(11), Line: 99})
	r := Check(in)
	want := "(stop " + at(10.2).Format(time.RFC3339Nano) + ", end open,"
	if !slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Kind == "outside-term" && strings.Contains(v.Detail, want) }) {
		t.Errorf("no outside-term violation saying %q: %v", want, r.Violations)
	}
}

// A run that ended as its instance was frozen was not reaped until the
// SIGCONT; the loop, waking, may skip the next tick as "still going"
// first (CI, etcd-cluster: tick :30's run ended 8 ms before the SIGSTOP,
// tick :31 skipped on waking 1.8 s later). Only that: a freeze that
// began more than the slack after the end, or a skip more than the slack
// after the wake, leaves the tick lost.
func TestCheck_StillGoingWhileFrozen(t *testing.T) {
	frozen := func(from, to, skip float64) Input {
		in := withEnds(clean())
		drop := func(s Start) bool { return s.Tick.Equal(at(5)) && !s.CatchUp }
		in.Starts = slices.DeleteFunc(in.Starts, drop)
		in.Ends = slices.DeleteFunc(in.Ends, func(e End) bool { return e.Tick.Equal(at(5)) })
		in.Frozen = []Interval{{Instance: "a", From: at(from), To: at(to)}}
		in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(skip), Reason: StillGoing}}
		return in
	}
	// Tick 4's run ended at 4.005 s.
	if r := Check(frozen(4.013, 5.8, 5.8)); !r.OK() {
		t.Errorf("frozen 8 ms after the run ended, skip on waking: %v", r.Violations)
	}
	for _, c := range []struct {
		name           string
		from, to, skip float64
	}{
		{"frozen 200 ms after the run ended", 4.205, 5.8, 5.8},
		{"skip 300 ms after waking", 4.013, 5.5, 5.8},
		{"woke before the tick", 4.013, 4.5, 5.001},
		{"skip logged while still frozen", 4.013, 5.8, 5.7},
	} {
		if r := Check(frozen(c.from, c.to, c.skip)); !lostAt(r, 5) {
			t.Errorf("%s: tick 5 not reported lost: %v", c.name, r.Violations)
		}
	}
}

// A run's end line comes before its instance reaps it; on a stalled
// machine the loop may skip the next tick as "still going" first. The
// stall counts when the job's own heartbeats measured it: two of one run
// on that instance, spanning the end line and the skip (less the slack),
// later than their sleep by at least the time between those.
func TestCheck_StillGoingWhileStalled(t *testing.T) {
	// Tick 4's run ended at 4.005 s; a skips tick 5 at 5.001 s: 896 ms
	// after the end line, less the slack. Job d's run sleeps 250 ms
	// between heartbeats.
	stalled := func(edit func(in *Input)) Input {
		in := withEnds(clean())
		in.Jobs["d"] = Policy{}
		in.Heartbeats = map[string]time.Duration{"d": 250 * time.Millisecond}
		in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(5)) && !s.CatchUp })
		in.Ends = slices.DeleteFunc(in.Ends, func(e End) bool { return e.Tick.Equal(at(5)) })
		in.Misfires = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(5), At: at(5.001), Reason: StillGoing}}
		in.Records = []Record{
			{Kind: "H", Job: "d", Tick: at(3), Token: 10, Instance: "a", At: at(3.9), Line: 100},
			{Kind: "H", Job: "d", Tick: at(3), Token: 10, Instance: "a", At: at(5.1), Line: 101},
		}
		if edit != nil {
			edit(&in)
		}
		return in
	}
	if r := Check(stalled(nil)); !r.OK() {
		t.Errorf("heartbeats 1.2 s apart (950 ms late) around the end and the skip: %v", r.Violations)
	}
	exact := stalled(nil)
	for _, e := range exact.Ends {
		if e.Tick.Equal(at(4)) {
			// As late as the time from the end line to the skip, less
			// the slack, to the nanosecond.
			exact.Records[1].At = exact.Records[0].At.Add(250*time.Millisecond + at(5.001).Add(-exact.Slack).Sub(e.At))
		}
	}
	if r := Check(exact); !r.OK() {
		t.Errorf("heartbeats exactly as late as the end line was early: %v", r.Violations)
	}
	for _, c := range []struct {
		name string
		edit func(in *Input)
	}{
		{"no heartbeat period", func(in *Input) { in.Heartbeats = nil }},
		{"heartbeats 850 ms late", func(in *Input) { in.Records[1].At = at(5.0) }},
		{"heartbeats of another instance", func(in *Input) { in.Records[0].Instance, in.Records[1].Instance = "b", "b" }},
		{"heartbeats of two runs", func(in *Input) { in.Records[1].Tick = at(4) }},
		{"heartbeats of a job with no period", func(in *Input) { in.Heartbeats = map[string]time.Duration{"k": 250 * time.Millisecond} }},
		{"the stall over before the skip", func(in *Input) { in.Records[0].At, in.Records[1].At = at(2.5), at(4.2) }},
		{"the stall begun after the end", func(in *Input) { in.Records[0].At, in.Records[1].At = at(4.1), at(6.1) }},
	} {
		if r := Check(stalled(c.edit)); !lostAt(r, 5) {
			t.Errorf("%s: tick 5 not reported lost: %v", c.name, r.Violations)
		}
	}
}
