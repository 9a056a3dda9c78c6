package history

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// clean is a history with no violation: a runs ticks 1..10 with token 10
// and is killed at 10.2 s; b leads at 12.5 s with token 20, reads 10 as
// the last claimed tick, runs one catch-up for the missed ticks 11 and 12
// (as 12, standing for the ticks from 11), then 13..20.
func clean() Input {
	in := Input{
		Jobs:          map[string]Policy{"j": {Every: time.Second, Misfire: "run-once", Grace: 5 * time.Second}},
		From:          at(0),
		To:            at(20),
		HandoverBound: time.Second,
		Slack:         100 * time.Millisecond,
		ClaimTimeout:  5 * time.Second,
		Terms: []Term{
			{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), Killed: true},
			{Instance: "b", Token: 20, Start: at(12.5)},
		},
	}
	line := 0
	add := func(inst string, tok uint64, tick, start float64, catchUp bool) {
		line++
		in.Starts = append(in.Starts, Start{Job: "j", Tick: at(tick), Token: tok, Instance: inst, At: at(start), CatchUp: catchUp, Line: line})
	}
	for s := 1; s <= 10; s++ {
		add("a", 10, float64(s), float64(s)+0.001, false)
	}
	add("b", 20, 12, 12.51, true)
	in.Starts[len(in.Starts)-1].CatchUpFrom = at(11)
	for s := 13; s <= 20; s++ {
		add("b", 20, float64(s), float64(s)+0.001, false)
	}
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(10)}}
	return in
}

// killedAtTheTick is clean() where a's term ends at 10.05 s, c leads from
// 10.95 s with token 15 (its catch-up runs tick 10) and is killed at
// 11.03 s, and b leads from 11.5 s and runs tick 12.
func killedAtTheTick() Input {
	in := clean()
	in.Terms[0].Stop = at(10.05)
	in.Terms[1].Start = at(11.5)
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 15, Start: at(10.95), Stop: at(11.03), Killed: true})
	slices.SortFunc(in.Terms, func(x, y Term) int { return x.Start.Compare(y.Start) })
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) || s.CatchUp })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(10), Token: 15, Instance: "c", At: at(10.96), CatchUp: true, Line: 98},
		Start{Job: "j", Tick: at(12), Token: 20, Instance: "b", At: at(12.001), Line: 99})
	return in
}

// termOverBeforeItsLoop is clean() where a's term ends at 10.2 s, c leads
// from 10.5 s to 12.3 s with token 15 and runs nothing, and b leads from
// 13.5 s, its catch-up (tick 13) standing for the ticks from 11.
func termOverBeforeItsLoop() Input {
	in := clean()
	in.Terms[0].Stop = at(10.2)
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 15, Start: at(10.5), Stop: at(12.3), End: at(12.31)})
	in.Terms[1].Start = at(13.5)
	slices.SortFunc(in.Terms, func(x, y Term) int { return x.Start.Compare(y.Start) })
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Compare(at(11)) >= 0 && s.Tick.Compare(at(13)) <= 0 })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(13), Token: 20, Instance: "b", At: at(13.51), CatchUp: true, CatchUpFrom: at(11), Line: 99})
	return in
}

func TestCheck_CleanHistoryPasses(t *testing.T) {
	r := Check(clean())
	if !r.OK() {
		t.Fatalf("violations in a clean history: %v", r.Violations)
	}
	if r.Runs != 19 || r.Terms != 2 {
		t.Errorf("runs %d terms %d, want 19 and 2", r.Runs, r.Terms)
	}
	if r.MaxFailover != 2300*time.Millisecond {
		t.Errorf("max failover %v, want 2.3s", r.MaxFailover)
	}
}

func TestCheck_ReportsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(in *Input)
		kind   string
		count  func(Report) int
	}{
		{"duplicated tick", func(in *Input) {
			// b starts tick 10 again with its own token.
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(10), Token: 20, Instance: "b", At: at(12.6), Line: 99})
		}, "duplicate", func(r Report) int { return r.Duplicates }},
		{"overlapping terms", func(in *Input) {
			// a (token 10) starts a run after b (token 20) began starting runs.
			in.Terms[0].Stop = time.Time{}
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(13.5), Token: 10, Instance: "a", At: at(13.5), Line: 99})
		}, "overlap", func(r Report) int { return r.Overlaps }},
		{"token going backwards", func(in *Input) {
			in.Terms[1].Token = 5
			for i := range in.Starts {
				if in.Starts[i].Instance == "b" {
					in.Starts[i].Token = 5
				}
			}
		}, "token-order", func(r Report) int { return r.TokenOrder }},
		{"lost tick while leading", func(in *Input) {
			// b never ran tick 15.
			var keep []Start
			for _, s := range in.Starts {
				if !s.Tick.Equal(at(15)) {
					keep = append(keep, s)
				}
			}
			in.Starts = keep
		}, "lost-tick", func(r Report) int { return r.LostTicks }},
		{"lost tick in a failover", func(in *Input) {
			// b ran no catch-up for the missed ticks 11 and 12.
			var keep []Start
			for _, s := range in.Starts {
				if !s.CatchUp {
					keep = append(keep, s)
				}
			}
			in.Starts = keep
		}, "lost-tick", func(r Report) int { return r.LostTicks }},
		{"start outside the term", func(in *Input) {
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(10.5), Token: 10, Instance: "a", At: at(10.9), Line: 99})
		}, "outside-term", func(r Report) int { return r.OutsideTerm }},
		{"start with another node's token", func(in *Input) {
			in.Starts[3].Instance = "b"
		}, "outside-term", func(r Report) int { return r.OutsideTerm }},
		{"slow graceful handover", func(in *Input) {
			in.Terms[0].Killed, in.Terms[0].Graceful, in.Terms[0].End = false, true, at(10.3)
		}, "slow-handover", func(r Report) int { return r.SlowHandovers }},
		{"run started before its tick", func(in *Input) {
			// a's run of tick 5 wrote its first line 40 ms before 5 s,
			// inside a's term and after its run of tick 4.
			in.Starts[4].At = at(4.96)
		}, "early-start", func(r Report) int { return r.EarlyStarts }},
		{"run ending after its graceful release, within the slack", func(in *Input) {
			in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), End: at(10.4), Graceful: true, SteppedDown: true}
			for _, s := range in.Starts {
				in.Ends = append(in.Ends, End{Job: s.Job, Tick: s.Tick, Token: s.Token, Instance: s.Instance, At: s.At.Add(100 * time.Millisecond)})
			}
			in.Terms[1].Start = at(10.5)
			in.Ends[9].At = at(10.45) // a's run of tick 10: 50 ms after the release
		}, "drain", func(r Report) int { return r.Drains }},
		{"catch-up standing for a tick after its own", func(in *Input) {
			in.Starts[10].CatchUpFrom = at(13) // b's catch-up of tick 12
		}, "catch-up-cover", func(r Report) int { return r.CatchUpCovers }},
		{"catch-up standing for a tick its term read as claimed", func(in *Input) {
			// b read tick 10 as the last claimed, and says its catch-up
			// stands for the ticks from 10.
			in.Starts[10].CatchUpFrom = at(10)
			in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(10)}}
		}, "catch-up-cover", func(r Report) int { return r.CatchUpCovers }},
		{"crash failover beyond its bound", func(in *Input) {
			in.CrashBound = 2 * time.Second // a killed at 10.2 s, b led at 12.5 s
		}, "slow-failover", func(r Report) int { return r.SlowFailovers }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := clean()
			tc.change(&in)
			r := Check(in)
			if tc.count(r) == 0 {
				t.Fatalf("no %s reported; violations: %v", tc.kind, r.Violations)
			}
			for _, v := range r.Violations {
				if v.Kind == tc.kind {
					t.Logf("reported: %s", v)
				}
			}
		})
	}
}

func TestCheck_PoliciesAccountForMissedTicks(t *testing.T) {
	// skip: no catch-up needed.
	in := clean()
	in.Jobs["j"] = Policy{Every: time.Second, Misfire: "skip", Grace: 5 * time.Second}
	var keep []Start
	for _, s := range in.Starts {
		if !s.CatchUp {
			keep = append(keep, s)
		}
	}
	in.Starts = keep
	if r := Check(in); !r.OK() {
		t.Errorf("skip policy: %v", r.Violations)
	}
	// run-all: one catch-up per missed tick is needed.
	in = clean()
	in.Jobs["j"] = Policy{Every: time.Second, Misfire: "run-all", Grace: 5 * time.Second}
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("run-all with only tick 12 caught up: lost ticks %d, want 1 (tick 11): %v", r.LostTicks, r.Violations)
	}
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(11), Token: 20, Instance: "b", At: at(12.505), CatchUp: true, Line: 98})
	if r := Check(in); !r.OK() {
		t.Errorf("run-all fully caught up: %v", r.Violations)
	}
	// beyond grace: nothing needed.
	in = clean()
	in.Jobs["j"] = Policy{Every: time.Second, Misfire: "run-once", Grace: 500 * time.Millisecond}
	in.Starts = keep
	if r := Check(in); !r.OK() {
		t.Errorf("gap beyond grace: %v", r.Violations)
	}
}

func TestParseRunLog(t *testing.T) {
	log := "S j 2026-01-01T00:00:01Z 10 a 1767225601001000000 0\nE j 2026-01-01T00:00:01Z 10 a 1767225601100000000 ok\nS j 2026-01-01T00:00:02Z 20 b 1767225602001000000 1\n"
	got, err := ParseRunLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Token != 20 || !got[1].CatchUp || got[1].Line != 3 || !got[0].At.Equal(t0.Add(1001*time.Millisecond)) {
		t.Errorf("parsed %+v", got)
	}
	if _, err := ParseRunLog(strings.NewReader("S j bad\n")); err == nil {
		t.Error("a malformed line parsed")
	}
}

// frozenLeader is a history in which a (token 10) is stopped (SIGSTOP) at
// 10.2 s, b leads at 14.5 s with token 20 and catches up tick 14 for the
// ticks 11..14, and a logs its loss only when it resumes at 17 s.
func frozenLeader() Input {
	in := clean()
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(17), End: at(17.01)}
	in.Terms[1].Start = at(14.5)
	in.Frozen = []Interval{{Instance: "a", From: at(10.2), To: at(17)}}
	var keep []Start
	for _, s := range in.Starts {
		if s.Instance == "a" || s.Tick.After(at(14)) {
			keep = append(keep, s)
		}
	}
	in.Starts = append(keep, Start{Job: "j", Tick: at(14), Token: 20, Instance: "b", At: at(14.51), CatchUp: true, CatchUpFrom: at(11), Line: 50})
	return in
}

func TestCheck_FrozenLeader(t *testing.T) {
	in := frozenLeader()
	r := Check(in)
	if !r.OK() {
		t.Fatalf("violations: %v", r.Violations)
	}
	if r.Accounted["frozen, then catch-up"] != 3 {
		t.Errorf("accounted %v, want ticks 11..13 as frozen, then catch-up", r.Accounted)
	}

	// Not frozen: a live term that silently misses ticks loses them, even
	// if the next term's catch-up covers them.
	in = frozenLeader()
	in.Frozen = nil
	if r := Check(in); r.LostTicks != 3 {
		t.Errorf("live unfrozen term missing ticks 11..13: lost %d, want 3: %v", r.LostTicks, r.Violations)
	}

	// Its late loss log does not widen its term: a start after b's term
	// began is outside a's term as the backend saw it, and overlaps b's.
	in = frozenLeader()
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(11), Token: 10, Instance: "a", At: at(16.9), Line: 99})
	r = Check(in)
	if r.OutsideTerm != 1 || r.Overlaps != 1 {
		t.Errorf("start by the frozen leader after the next term began: outside-term %d overlaps %d, want 1 and 1: %v",
			r.OutsideTerm, r.Overlaps, r.Violations)
	}
}

func TestCheck_LoggedMisfiresAccountForTicks(t *testing.T) {
	in := clean()
	var keep []Start
	for _, s := range in.Starts {
		if !s.Tick.Equal(at(15)) {
			keep = append(keep, s)
		}
	}
	in.Starts = keep
	in.Misfires = []Misfire{{Instance: "b", Token: 20, Job: "j", Tick: at(15), At: at(15.001), Reason: "run not started: claim failed"}}
	r := Check(in)
	if !r.OK() || r.Accounted["logged: run not started: claim failed"] != 1 {
		t.Errorf("a logged claim failure: violations %v, accounted %v", r.Violations, r.Accounted)
	}
	// A logged misfire of another job does not count, nor one that
	// another instance than the live term's logged.
	in.Misfires[0].Job = "other"
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("misfire of another job: lost %d, want 1", r.LostTicks)
	}
	in.Misfires[0].Job, in.Misfires[0].Instance = "j", "a"
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("misfire logged by a node that was not leading: lost %d, want 1", r.LostTicks)
	}
	// b logged that its catch-up could not read the last claimed tick.
	in = clean()
	keep = nil
	for _, s := range in.Starts {
		if !s.CatchUp {
			keep = append(keep, s)
		}
	}
	in.Starts = keep
	in.Misfires = []Misfire{{Instance: "b", Token: 20, Job: "j", At: at(12.5), Reason: "catch-up skipped: reading last claimed tick failed"}}
	if r := Check(in); !r.OK() {
		t.Errorf("logged catch-up failure: %v", r.Violations)
	}
	// The same for every job at once (a page of jobs, no job named).
	in.Misfires[0].Job = ""
	if r := Check(in); !r.OK() {
		t.Errorf("logged catch-up failure of every job: %v", r.Violations)
	}
	// Another job's failure does not count.
	in.Misfires[0].Job = "other"
	if r := Check(in); r.LostTicks == 0 {
		t.Errorf("another job's catch-up failure accounted for j's ticks")
	}
}

func TestCheck_StartBeforeNextTermAfterOwnLossLog(t *testing.T) {
	// a lost its lease and said so at 10.2 s; a start at 11 s is outside
	// its term even though nobody led yet.
	in := clean()
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), End: at(10.3)}
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(11), Token: 10, Instance: "a", At: at(11.001), Line: 99})
	if r := Check(in); r.OutsideTerm != 1 {
		t.Errorf("start after the own loss: outside-term %d, want 1: %v", r.OutsideTerm, r.Violations)
	}
	// A graceful term may start a run it had fired after "stepping down",
	// until its release.
	in = clean()
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(9.9), End: at(10.5), Graceful: true}
	if r := Check(in); r.OutsideTerm != 0 {
		t.Errorf("start between stepping down and release: %v", r.Violations)
	}
	// The same when the release fails after the step-down.
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(9.9), End: at(10.5), SteppedDown: true}
	if r := Check(in); r.OutsideTerm != 0 {
		t.Errorf("start between stepping down and a failed release: %v", r.Violations)
	}
	// The same when the lease is lost during the drain: the term ends at
	// the loss, not at the step-down.
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(9.9), Lost: at(10.4), End: at(10.5)}
	if r := Check(in); r.OutsideTerm != 0 {
		t.Errorf("start between stepping down and a later loss: %v", r.Violations)
	}
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(10.5), Token: 10, Instance: "a", At: at(10.45 + 0.2), Line: 99})
	if r := Check(in); r.OutsideTerm != 1 {
		t.Errorf("start after the loss that followed a step-down: outside-term %d, want 1: %v", r.OutsideTerm, r.Violations)
	}
}

func TestCheck_DrainAndCrashFailover(t *testing.T) {
	in := clean()
	if r := Check(in); r.MaxCrashFailover != 2300*time.Millisecond {
		t.Errorf("max crash failover %v, want 2.3s", r.MaxCrashFailover)
	}
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), End: at(10.4), Graceful: true}
	in.Terms[1].Start = at(10.45)
	for _, s := range in.Starts {
		in.Ends = append(in.Ends, End{Job: s.Job, Tick: s.Tick, Token: s.Token, Instance: s.Instance, At: s.At.Add(100 * time.Millisecond)})
	}
	if r := Check(in); r.Drains != 0 || r.MaxHandover != 50*time.Millisecond {
		t.Errorf("drained: drains %d handover %v: %v", r.Drains, r.MaxHandover, r.Violations)
	}
	in.Ends[9].At = at(10.9) // a's last run (tick 10) ends after the release
	if r := Check(in); r.Drains != 1 {
		t.Errorf("run ending after the release: drains %d, want 1: %v", r.Drains, r.Violations)
	}
	in.Ends = in.Ends[:9]
	if r := Check(in); r.Drains != 1 {
		t.Errorf("run never ending: drains %d, want 1: %v", r.Drains, r.Violations)
	}
}

func TestParseEnds(t *testing.T) {
	log := "S j 2026-01-01T00:00:01Z 10 a 1767225601001000000 0\nE j 2026-01-01T00:00:01Z 10 a 1767225601100000000 0\n"
	got, err := ParseEnds(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Token != 10 || got[0].Line != 2 || !got[0].At.Equal(t0.Add(1100*time.Millisecond)) {
		t.Errorf("parsed %+v", got)
	}
}

func TestCheck_LiveTermsOwnCatchUp(t *testing.T) {
	// b logged its term at 10.5 s but its catch-up (tick 12, covering 11)
	// ran only at 12.3 s: tick 11 came while b was live, before its
	// schedule loop began.
	in := clean()
	in.Terms[1].Start = at(10.5)
	for i := range in.Starts {
		if in.Starts[i].CatchUp {
			in.Starts[i].At = at(12.3)
		}
	}
	if r := Check(in); !r.OK() || r.Accounted["catch-up"] != 1 {
		t.Errorf("violations %v, accounted %v; want tick 11 accounted for by b's catch-up", r.Violations, r.Accounted)
	}
}

func TestCheck_ExcusedTransitions(t *testing.T) {
	// A slow handover is a violation, unless it overlaps a fault from
	// outside the history (another group's backend fault), which takes
	// it out of the bound and the maxima.
	in := clean()
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), End: at(10.4), Graceful: true}
	in.Terms[1].Start = at(12.9)
	in.HandoverBound = 2 * time.Second
	if r := Check(in); r.SlowHandovers != 1 || r.Excused != 0 {
		t.Errorf("slow handover: slow %d, excused %d; want 1, 0", r.SlowHandovers, r.Excused)
	}
	in.Excused = []Interval{{From: at(3), To: at(11)}}
	r := Check(in)
	if r.SlowHandovers != 0 || r.Excused != 1 || r.MaxHandover != 0 {
		t.Errorf("slow handover during an excused span: slow %d, excused %d, max %v; want 0, 1, 0", r.SlowHandovers, r.Excused, r.MaxHandover)
	}
	in.Excused = []Interval{{From: at(13), To: at(20)}} // after the next term began
	if r := Check(in); r.SlowHandovers != 1 || r.Excused != 0 {
		t.Errorf("excused span after the handover: slow %d, excused %d; want 1, 0", r.SlowHandovers, r.Excused)
	}
	// Safety is judged regardless: a duplicate inside an excused span is
	// still one.
	in.Excused = []Interval{{From: at(0), To: at(30)}}
	in.Starts = append(in.Starts, in.Starts[0])
	if r := Check(in); r.Duplicates != 1 {
		t.Errorf("duplicate in an excused span: %d, want 1", r.Duplicates)
	}
}

func TestCheck_TermKilledJustBeforeATick(t *testing.T) {
	// c led from 10.95 s and was killed at 10.999 s, before tick 11 came:
	// it ran its own catch-up (tick 10 is a's) and nothing else. Tick 11
	// falls to b, whose catch-up (tick 12) covers it, though c's term
	// began within the slack before the tick.
	in := clean()
	in.Terms[0].Stop = at(10.05)
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 15, Start: at(10.95), Stop: at(10.999), Killed: true})
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(10), Token: 15, Instance: "c", At: at(10.96), CatchUp: true, Line: 99})
	if r := Check(in); !r.OK() || r.Accounted["catch-up"] != 1 {
		t.Errorf("violations %v, accounted %v; want tick 11 accounted for by b's catch-up", r.Violations, r.Accounted)
	}
}

func TestCheck_TermFrozenJustAfterItBegan(t *testing.T) {
	// c led from 10.95 s, ran its own catch-up (tick 10 is a's) and was
	// stopped (SIGSTOP) at 10.99 s, before tick 11 came; its lease lapsed
	// and b led at 12.5 s, whose catch-up (tick 12) covers tick 11. c's
	// term began within the slack before the tick, so it may have been
	// live at it: frozen, then b's catch-up accounts for it.
	in := clean()
	in.Terms[0].Stop = at(10.05)
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 15, Start: at(10.95), Stop: at(14), End: at(14.01)})
	slices.SortFunc(in.Terms, func(x, y Term) int { return x.Start.Compare(y.Start) })
	in.Frozen = []Interval{{Instance: "c", From: at(10.99), To: at(14)}}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(10), Token: 15, Instance: "c", At: at(10.96), CatchUp: true, Line: 99})
	r := Check(in)
	if !r.OK() || r.Accounted["frozen, then catch-up"] != 1 {
		t.Errorf("violations %v, accounted %v; want tick 11 accounted for as frozen, then b's catch-up", r.Violations, r.Accounted)
	}

	// Not frozen, c's term ran neither tick 11 nor a catch-up standing
	// for it: lost.
	in.Frozen = nil
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("c unfrozen: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
}

func TestCheck_ClaimedByATermKilledAtTheTick(t *testing.T) {
	// a claims tick 10 and is killed at 10.05 s, before the run starts:
	// the claim stands (at most once). b leads at 10.9 s and finds no tick
	// missed (it logs no last claim), so tick 10 is accounted for.
	killed := func() Input {
		in := clean()
		in.Terms[0].Stop = at(10.05)
		in.Terms[1].Start = at(10.9)
		in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) || s.CatchUp })
		in.Starts = append(in.Starts, Start{Job: "j", Tick: at(11), Token: 20, Instance: "b", At: at(11.001), Line: 98},
			Start{Job: "j", Tick: at(12), Token: 20, Instance: "b", At: at(12.001), Line: 99})
		return in
	}
	r := Check(killed())
	if !r.OK() || r.Accounted["claimed by a term killed at the tick"] != 1 {
		t.Errorf("violations %v, accounted %v; want tick 10 claimed by a's killed term", r.Violations, r.Accounted)
	}

	// b read tick 9 as the last claim, so tick 10 was not claimed, and b's
	// catch-up should have run it.
	in := killed()
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(9)}}
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("b read last claim 9: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
	// b read tick 10: accounted for.
	in.LastClaims[0].Tick = at(10)
	if r := Check(in); !r.OK() {
		t.Errorf("b read last claim 10: %v", r.Violations)
	}
	// a was not killed: it lost its term and should have logged why.
	in = killed()
	in.Terms[0].Killed = false
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("a not killed: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
	// Nor does an older term killed at the tick account for it: the
	// claim would be a's, the latest term begun before the tick (z, which
	// ran nothing, overlaps a only in the terms' bounds, which no record
	// check sees).
	in.Terms = append([]Term{{Instance: "z", Token: 5, Start: at(0.2), Stop: at(10.05), Killed: true}}, in.Terms...)
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("a not killed, an older term killed at 10.05 s: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
	// a was killed well after the tick, but before the job's next one: its
	// claim may have been on a slow link (a soak saw a kill 397 ms after a
	// tick, with 270 ms of latency each way). b found no tick missed, so
	// the claim landed: accounted for (TestCheck_KilledBeforeTheJobsNextTick).
	in = killed()
	in.Terms[0].Stop = at(10.5)
	if r := Check(in); !r.OK() {
		t.Errorf("a killed at 10.5 s, b found no tick missed: %v", r.Violations)
	}
	// Had b read tick 9 as the last claim, tick 10 would be lost.
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(9)}}
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("a killed at 10.5 s, b read last claim 9: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
}

func TestCheck_TermOverBeforeItsLoop(t *testing.T) {
	// c led from 10.5 s; its catch-up claim (tick 10) hung and failed when
	// the term ended at 12.3 s, so its schedule loop never began: ticks 11
	// and 12 fell to b, whose catch-up (tick 13) covers them.
	in := termOverBeforeItsLoop()
	r := Check(in)
	if !r.OK() || r.Accounted["term over before its schedule loop began, then catch-up"] != 2 {
		t.Errorf("violations %v, accounted %v; want ticks 11 and 12 accounted for by b's catch-up", r.Violations, r.Accounted)
	}
	// Had c's loop decided a tick, ticks 11 and 12 would be c's to run.
	loopRan := in
	loopRan.Misfires = []Misfire{{Instance: "c", Token: 15, Job: "j", Tick: at(11), At: at(11.01), Reason: "run not started: claim failed"}}
	if r := Check(loopRan); r.LostTicks != 1 {
		t.Errorf("c's loop ran: lost %d, want 1 (tick 12): %v", r.LostTicks, r.Violations)
	}
	// A catch-up run is not the loop: a killed at 9.5 s, c's catch-up
	// ran tick 10 and its claims of the last ticks hung until 12.3 s.
	in.Terms[0].Stop = at(9.5)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Token == 10 && s.Tick.Equal(at(10)) })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(10), Token: 15, Instance: "c", At: at(10.6), CatchUp: true, CatchUpFrom: at(10), Line: 98})
	if r := Check(in); !r.OK() {
		t.Errorf("c ran only its catch-up, of tick 10: %v", r.Violations)
	}
}

func TestCheck_KilledWhileAskingAClaimAgain(t *testing.T) {
	// a's claim of tick 10 lost its answer; a asked again and was killed
	// at 10.9 s. b led from 10.95 s and found no tick missed: the claim
	// landed and nobody runs tick 10 (at most once).
	in := clean()
	in.Terms[0].Stop = at(10.9)
	in.Terms[1].Start = at(10.95)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) || s.CatchUp })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(11), Token: 20, Instance: "b", At: at(11.001), Line: 98},
		Start{Job: "j", Tick: at(12), Token: 20, Instance: "b", At: at(12.001), Line: 99})
	in.Asked = []Misfire{{Instance: "a", Token: 10, Job: "j", Tick: at(10), At: at(10.5)}}
	r := Check(in)
	if !r.OK() || r.Accounted["claim in flight when its instance was killed (the claim landed)"] != 1 {
		t.Errorf("violations %v, accounted %v; want tick 10 accounted for", r.Violations, r.Accounted)
	}
	// b read tick 9: the claim did not land, and b ran no catch-up: lost.
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(9)}}
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("b read 9, no catch-up: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
	// With b's catch-up standing for tick 10 (run-once: tick 11, b
	// started just after it), it is accounted for.
	caught := slices.Clone(in.Starts)
	for i := range caught {
		if caught[i].Instance == "b" && caught[i].Tick.Equal(at(11)) {
			caught[i].CatchUp, caught[i].CatchUpFrom = true, at(10)
		}
	}
	saved := in.Starts
	in.Starts = caught
	in.Terms[1].Start = at(11.05)
	if r := Check(in); !r.OK() || r.Accounted["claim in flight when its instance was killed, then catch-up"] != 1 {
		t.Errorf("b read 9, caught up: violations %v, accounted %v", r.Violations, r.Accounted)
	}
	in.Starts, in.Terms[1].Start, in.LastClaims = saved, at(10.95), nil
	// Not killed: a should have logged the claim's outcome.
	in.Terms[0].Killed = false
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("a not killed: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
}

func TestCheck_TermKilledJustAfterATick(t *testing.T) {
	// c led from 10.95 s (its catch-up ran tick 10) and was killed at
	// 11.03 s, its claim of tick 11 landed and its run not started. b led
	// at 11.5 s and found no tick missed: at most once.
	in := killedAtTheTick()
	in.LastClaims[0].Tick = at(11) // b found no tick missed after 11
	r := Check(in)
	if !r.OK() || r.Accounted["claimed by a term killed at the tick"] != 1 {
		t.Errorf("violations %v, accounted %v; want tick 11 claimed by c's killed term", r.Violations, r.Accounted)
	}
	// b read tick 10 as the last claim: tick 11 was not claimed, and b
	// ran no catch-up for it: lost.
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(10)}}
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("b read 10: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
}

func TestCheck_KilledWithAClaimInFlight(t *testing.T) {
	// a admitted tick 10, whose claim hung (a backend election); it
	// skipped ticks 11 and 12 while it was in flight and was killed at
	// 12.3 s. b led at 12.5 s and read tick 10 as the last claim.
	in := clean()
	in.Terms[0].Stop = at(12.3)
	in.Terms[1].Start = at(12.5)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Compare(at(10)) >= 0 && s.Tick.Compare(at(12)) <= 0 })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(12), Token: 20, Instance: "b", At: at(12.51), CatchUp: true, Line: 99})
	in.Misfires = []Misfire{
		{Instance: "a", Token: 10, Job: "j", Tick: at(11), At: at(11.001), Reason: StillGoing},
		{Instance: "a", Token: 10, Job: "j", Tick: at(12), At: at(12.001), Reason: StillGoing},
	}
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(10)}}
	r := Check(in)
	if !r.OK() {
		t.Errorf("violations %v, accounted %v", r.Violations, r.Accounted)
	}
	// Not killed: a should have logged the claim's outcome.
	in.Terms[0].Killed = false
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("a not killed: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
	// Killed, but a started a run of tick 11 after tick 10: tick 10 was
	// not in flight, a dropped it.
	in.Terms[0].Killed = true
	in.Misfires = in.Misfires[1:]
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(11), Token: 10, Instance: "a", At: at(11.001), Line: 98})
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("a ran tick 11: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
}

func TestCheck_TermOverAsItBegan(t *testing.T) {
	// c's lease lapsed as it began (12.2 s to 12.201 s; it decided no
	// tick): tick 11 (and 12) fall to b, whose catch-up covers them.
	in := clean()
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 15, Start: at(12.2), Stop: at(12.201), End: at(12.21)})
	slices.SortFunc(in.Terms, func(x, y Term) int { return x.Start.Compare(y.Start) })
	if r := Check(in); !r.OK() || r.Accounted["catch-up"] != 1 {
		t.Errorf("violations %v, accounted %v; want tick 11 accounted for by b's catch-up", r.Violations, r.Accounted)
	}
	// Had c decided a tick (of another job), tick 11 would have been its
	// catch-up's.
	in.Misfires = []Misfire{{Instance: "c", Token: 15, Job: "k", Tick: at(12), At: at(12.2005), Reason: "run not started: term over"}}
	if r := Check(in); r.LostTicks != 1 {
		t.Errorf("c active: lost %d, want 1: %v", r.LostTicks, r.Violations)
	}
}

func TestCheck_TermKilledInItsCatchUp(t *testing.T) {
	// c led at 12.3 s and its catch-up claimed tick 12 (standing for 11
	// and 12), but c was killed at 12.31 s before the run started. b led
	// at 12.5 s and read tick 12 as the last claim.
	in := clean()
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 15, Start: at(12.3), Stop: at(12.31), Killed: true})
	slices.SortFunc(in.Terms, func(x, y Term) int { return x.Start.Compare(y.Start) })
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.CatchUp })
	in.Misfires = []Misfire{{Instance: "c", Token: 15, Job: "k", Tick: at(12), At: at(12.305), Reason: "run not started: claim failed"}}
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(12)}}
	if r := Check(in); !r.OK() || r.Accounted["claimed by a term killed at the tick"] != 2 {
		t.Errorf("violations %v, accounted %v; want ticks 11 and 12 claimed by c", r.Violations, r.Accounted)
	}
	// b read tick 10: c claimed nothing, and b ran no catch-up: lost.
	in.LastClaims[0].Tick = at(10)
	if r := Check(in); r.LostTicks != 2 {
		t.Errorf("b read 10: lost %d, want 2: %v", r.LostTicks, r.Violations)
	}
}

func TestCheck_KilledBeforeTheJobsNextTick(t *testing.T) {
	// a admitted tick 10, whose claim took long (latency on its link: no
	// retry, no later tick skipped), and was killed at 10.6 s, past the
	// slack but before the job's next tick. b led at 12.5 s and read tick
	// 10 as the last claim: the claim landed, the run never started.
	in := clean()
	in.Terms[0].Stop = at(10.6)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) })
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(10)}}
	if r := Check(in); !r.OK() {
		t.Errorf("violations %v, accounted %v", r.Violations, r.Accounted)
	}
	// b read tick 9 as the last claim: tick 10's claim never landed, and
	// b's catch-up (tick 12, run-once) covers it.
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(9)}}
	for i := range in.Starts {
		if in.Starts[i].CatchUp {
			in.Starts[i].CatchUpFrom = at(10)
		}
	}
	if r := Check(in); !r.OK() {
		t.Errorf("claim not landed, caught up: violations %v", r.Violations)
	}
	// ... but without that catch-up, tick 10 is lost.
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.CatchUp })
	if r := Check(in); r.LostTicks == 0 {
		t.Errorf("claim not landed, no catch-up: no lost tick, accounted %v", r.Accounted)
	}
	// Killed after the job's next tick (11), which it neither ran nor
	// logged: tick 10 was not in flight at the kill, it was dropped.
	in = clean()
	in.Terms[0].Stop = at(11.4)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) })
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(10)}}
	if r := Check(in); r.LostTicks == 0 {
		t.Errorf("killed after the next tick: no lost tick, accounted %v", r.Accounted)
	}
	// Not killed: a should have logged the claim's outcome.
	in = clean()
	in.Terms[0].Stop, in.Terms[0].Killed = at(10.6), false
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) })
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(10)}}
	if r := Check(in); r.LostTicks == 0 {
		t.Errorf("not killed: no lost tick, accounted %v", r.Accounted)
	}
}

// Two runs now asked within one second have the same tick to the second
// in the records: they are two runs, unless they are one request's.
func TestCheck_RunsNowWithinOneSecond(t *testing.T) {
	log := "S manual 2026-01-01T00:00:11Z 20 b 1767225612657743312 req-1\n" +
		"S manual 2026-01-01T00:00:11Z 20 b 1767225613169044936 req-2\n"
	in := clean()
	now, err := ParseRunLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if now[0].Request != "req-1" || now[1].Request != "req-2" {
		t.Fatalf("requests parsed as %q and %q", now[0].Request, now[1].Request)
	}
	in.Starts = append(in.Starts, now...)
	if r := Check(in); r.Duplicates != 0 {
		t.Errorf("two requests: %v", r.Violations)
	}
	in.Starts[len(in.Starts)-1].Request = "req-1"
	if r := Check(in); r.Duplicates != 1 {
		t.Errorf("one request run twice: %d duplicates, want 1", r.Duplicates)
	}
}
