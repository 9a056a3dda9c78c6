package auditcmp

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/e2e/internal/history"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

var policy = history.Policy{Every: time.Second, Misfire: "run-once", Grace: 5 * time.Second}

// story is a history and the accounting that agrees with it: a leads
// with token 10 and runs ticks 1..10, is killed at 10.2 s; b leads at
// 12.5 s with token 20, its catch-up runs tick 12 standing for 11, then
// b runs 13..20.
func story() (history.Input, audit.Account) {
	in := history.Input{
		Jobs: map[string]history.Policy{"j": policy}, From: at(0), To: at(20),
		Slack: 100 * time.Millisecond, ClaimTimeout: 5 * time.Second,
		Terms: []history.Term{
			{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), Killed: true},
			{Instance: "b", Token: 20, Start: at(12.5)},
		},
		LastClaims: []history.LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(10)}},
	}
	run := func(inst string, tok uint64, tick int, catchUp bool) {
		s := history.Start{Job: "j", Tick: at(float64(tick)), Token: tok, Instance: inst, At: at(float64(tick) + 0.001), CatchUp: catchUp, Line: len(in.Starts) + 1}
		if catchUp {
			s.At = at(12.51)
			s.CatchUpFrom = at(11)
		}
		in.Starts = append(in.Starts, s)
		in.Ends = append(in.Ends, history.End{Job: "j", Tick: s.Tick, Token: tok, Instance: inst, At: s.At.Add(100 * time.Millisecond)})
	}
	for s := 1; s <= 10; s++ {
		run("a", 10, s, false)
	}
	run("b", 20, 12, true)
	for s := 13; s <= 20; s++ {
		run("b", 20, s, false)
	}
	a := audit.Account{Job: "j", Specs: []audit.Spec{{At: at(-60), Schedule: "@every 1s", Zone: "UTC"}}}
	next := every(time.Second)
	a.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, First: at(1), Last: at(10), Count: 10, Token: 10, Instance: "a"}, next)
	a.Add(audit.Range{Class: audit.Covered, Reason: audit.ReasonCatchUp, First: at(11), Last: at(11), Count: 1, By: at(12)}, next)
	a.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, First: at(12), Last: at(20), Count: 9, Token: 20, Instance: "b"}, next)
	return in, a
}

func every(d time.Duration) audit.Next {
	return func(t time.Time) time.Time { return t.Truncate(d).Add(d) }
}

// report computes the accounting's report of a over the checker's window.
func report(t *testing.T, in history.Input, a audit.Account) audit.Report {
	t.Helper()
	rep, err := audit.Compute(audit.Input{Account: a, From: in.From, To: in.To, Lag: 3 * time.Second,
		Schedules: func(audit.Spec) (audit.Next, error) { return every(time.Second), nil }})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// compare checks in and compares the verdicts with a's report, all
// ticks compared.
func compare(t *testing.T, in history.Input, a audit.Account) (history.Report, Result) {
	t.Helper()
	r := history.Check(in)
	return r, Compare(r.Ticks, []audit.Report{report(t, in, a)}, in.Jobs, in.To)
}

func TestCompare_Agrees(t *testing.T) {
	in, a := story()
	r, res := compare(t, in, a)
	if !r.OK() {
		t.Fatalf("the story breaks a guarantee: %v", r.Violations)
	}
	if !res.OK() || res.Compared != 20 || res.Due != 20 || res.Classes[audit.Ran] != 19 || res.Classes[audit.Covered] != 1 {
		t.Fatalf("%+v", res)
	}
	if s := res.Summary("etcd", 5); !strings.Contains(s, "due 20 (ran 19, skipped 0, covered 1,") || !strings.Contains(s, "disagreements 0") {
		t.Errorf("summary: %s", s)
	}
}

// Accountings that are wrong, each against the story's history: every
// one must be rejected, and name the tick.
func TestCompare_RejectsWrongAccounting(t *testing.T) {
	next := every(time.Second)
	for _, tc := range []struct {
		name string
		edit func(in *history.Input, a *audit.Account)
		tick string // in the disagreement
	}{
		{"a covered tick accounted as missed, unaccounted", func(_ *history.Input, a *audit.Account) {
			a.Ranges[1].Class, a.Ranges[1].Reason, a.Ranges[1].By = audit.Missed, audit.ReasonUnaccounted, time.Time{}
		}, "00:00:11.000"},
		{"a covered tick left out: unaccounted", func(_ *history.Input, a *audit.Account) {
			a.Ranges = slices.Delete(a.Ranges, 1, 2)
		}, "00:00:11.000"},
		{"a tick that ran accounted as missed while nobody led", func(_ *history.Input, a *audit.Account) {
			a.Ranges[0].Last, a.Ranges[0].Count = at(4), 4
			a.Add(audit.Range{Class: audit.Missed, Reason: audit.ReasonNoLeader, First: at(5), Last: at(5), Count: 1}, next)
			a.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, First: at(6), Last: at(10), Count: 5, Token: 10, Instance: "a"}, next)
		}, "00:00:05.000"},
		{"a tick that ran accounted to another term", func(_ *history.Input, a *audit.Account) {
			a.Ranges[0].Last, a.Ranges[0].Count = at(4), 4
			a.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonFailed, First: at(5), Last: at(5), Count: 1, Token: 20, Instance: "b"}, next)
			a.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, First: at(6), Last: at(10), Count: 5, Token: 10, Instance: "a"}, next)
		}, "00:00:05.000"},
		{"a lost tick accounted as run", func(in *history.Input, _ *audit.Account) {
			in.Starts = slices.DeleteFunc(in.Starts, func(s history.Start) bool { return s.Tick.Equal(at(5)) })
		}, "00:00:05.000"},
		{"a lost tick accounted as lost by another term", func(in *history.Input, a *audit.Account) {
			in.Starts = slices.DeleteFunc(in.Starts, func(s history.Start) bool { return s.Tick.Equal(at(5)) })
			a.Ranges[0].Last, a.Ranges[0].Count = at(4), 4
			a.Add(audit.Range{Class: audit.Lost, Reason: audit.ReasonOutcomeUnknown, First: at(5), Last: at(5), Count: 1, Token: 20, Instance: "b"}, next)
			a.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, First: at(6), Last: at(10), Count: 5, Token: 10, Instance: "a"}, next)
		}, "00:00:05.000"},
		{"ticks due from later than the window's start", func(_ *history.Input, a *audit.Account) {
			a.Specs[0].At = at(3.5)
		}, "00:00:01.000"},
	} {
		in, a := story()
		tc.edit(&in, &a)
		_, res := compare(t, in, a)
		if res.OK() {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		found := false
		for _, d := range res.Disagreements {
			found = found || strings.Contains(d, tc.tick)
		}
		if !found {
			t.Errorf("%s: no disagreement names tick %s: %q", tc.name, tc.tick, res.Disagreements)
		}
	}
}

// A lost tick (the checker's finding) is in the accounting with the same
// cause: missed and unaccounted while its term was live, or lost by that
// term.
func TestCompare_LostTickSameCause(t *testing.T) {
	next := every(time.Second)
	for _, r := range []audit.Range{
		{Class: audit.Missed, Reason: audit.ReasonUnaccounted, First: at(5), Last: at(5), Count: 1},
		{Class: audit.Lost, Reason: audit.ReasonOutcomeUnknown, First: at(5), Last: at(5), Count: 1, Token: 10, Instance: "a"},
	} {
		in, a := story()
		in.Starts = slices.DeleteFunc(in.Starts, func(s history.Start) bool { return s.Tick.Equal(at(5)) })
		a.Ranges[0].Last, a.Ranges[0].Count = at(4), 4
		a.Add(r, next)
		a.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, First: at(6), Last: at(10), Count: 5, Token: 10, Instance: "a"}, next)
		cr, res := compare(t, in, a)
		if cr.LostTicks != 1 || !res.OK() || res.Lost != 1 {
			t.Errorf("%s(%s): checker lost %d; %+v", r.Class, r.Reason, cr.LostTicks, res)
		}
	}
}

// Ticks after the cut-off are counted and not compared: the accounting
// may not have written them yet.
func TestCompare_Cutoff(t *testing.T) {
	in, a := story()
	a.Ranges = a.Ranges[:2] // 12..20 not written: pending or unaccounted
	r := history.Check(in)
	res := Compare(r.Ticks, []audit.Report{report(t, in, a)}, in.Jobs, at(11))
	if !res.OK() || res.Compared != 11 || res.Pending != 9 {
		t.Fatalf("%+v", res)
	}
	if res = Compare(r.Ticks, []audit.Report{report(t, in, a)}, in.Jobs, at(12)); res.OK() {
		t.Fatalf("tick 12 compared, unwritten: accepted")
	}
}

// Every reason the checker gives has a row; a new one does not pass
// unseen.
func TestAllowed_Rows(t *testing.T) {
	for _, reason := range []string{
		"catch-up", "beyond grace", "skip policy", "no later term",
		"no claim of the job before it (its catch-up had nothing to count from)",
		"skipped over by a clock step, beyond grace",
		"frozen, then catch-up", "frozen, then claimed by a term killed at the tick",
		"claim refused as stale by the term before (the claim landed)",
		"frozen, then killed as it woke (the claim landed)",
		"claim refused as stale, then beyond grace",
		"claim in flight when its instance was killed (the claim landed)",
		"killed before the job's next tick, its claim possibly in flight, no later term",
		"term over before its schedule loop began, then catch-up",
		"frozen, then catch-up claim refused as stale, then its claim landed",
		"logged: " + history.StillGoing, "logged: run not started: claim failed (catch-up)",
		"logged: catch-up skipped: reading last claimed ticks failed",
		"logged: run started, then its instance was killed",
	} {
		if ws, ok := Allowed(history.TickVerdict{Verdict: history.VerdictAccounted, Reason: reason}); !ok || len(ws) == 0 {
			t.Errorf("%q: no row", reason)
		}
	}
	for _, reason := range []string{"logged: something new", "frozen, then something new", "something new, then catch-up"} {
		if _, ok := Allowed(history.TickVerdict{Verdict: history.VerdictAccounted, Reason: reason}); ok {
			t.Errorf("%q: a row", reason)
		}
	}
	res := Compare([]history.TickVerdict{{Job: "j", Tick: at(1), Verdict: history.VerdictAccounted, Reason: "logged: something new"}},
		[]audit.Report{{Job: "j", From: at(0), To: at(1), Due: 1, Classes: map[audit.Class]int64{audit.Ran: 1}}},
		map[string]history.Policy{"j": policy}, at(1))
	if res.OK() {
		t.Errorf("a reason without a row: accepted")
	}
}

// A tick the live term logged it skipped (or whose claim failed) may be
// in the next term's catch-up gap: covered, by a later term only. A run
// baton recorded no outcome of may be lost, by its own term only.
func TestCompare_LaterTermAndNoOutcome(t *testing.T) {
	one := func(v history.TickVerdict, r audit.Range) Result {
		r.First, r.Last, r.Count = at(1), at(1), 1
		v.Job, v.Tick = "j", at(1)
		rep := audit.Report{Job: "j", From: at(0), To: at(1), Due: 1, Classes: map[audit.Class]int64{r.Class: 1}, NotOK: []audit.Range{r}}
		return Compare([]history.TickVerdict{v}, []audit.Report{rep}, map[string]history.Policy{"j": policy}, at(1))
	}
	skipped := history.TickVerdict{Verdict: history.VerdictAccounted, Reason: "logged: " + history.StillGoing, Token: 10, Instance: "a"}
	ran := history.TickVerdict{Verdict: history.VerdictRan, Token: 10, Instance: "a", Ended: true}
	frozen := history.TickVerdict{Verdict: history.VerdictAccounted, Reason: "logged: run started, then its instance was frozen", Token: 10, Instance: "a"}
	killed := history.TickVerdict{Verdict: history.VerdictAccounted, Reason: "logged: run started, then its instance was killed", Token: 10, Instance: "a"}
	termOver := history.TickVerdict{Verdict: history.VerdictAccounted, Reason: "logged: run not started: term over", Token: 10, Instance: "a"}
	claimFailed := history.TickVerdict{Verdict: history.VerdictAccounted, Reason: "logged: run not started: claim failed", Token: 10, Instance: "a"}
	noCatchUp := history.TickVerdict{Verdict: history.VerdictAccounted, Reason: "logged: catch-up skipped: reading last claimed ticks failed", Token: 10, Instance: "a"}
	for _, c := range []struct {
		name string
		v    history.TickVerdict
		r    audit.Range
		ok   bool
	}{
		{"skipped, covered by the next term", skipped, audit.Range{Class: audit.Covered, Reason: audit.ReasonCatchUp, Token: 20, By: at(3)}, true},
		{"skipped, covered by its own term", skipped, audit.Range{Class: audit.Covered, Reason: audit.ReasonCatchUp, Token: 10, By: at(3)}, false},
		{"skipped, covered by an earlier term", skipped, audit.Range{Class: audit.Covered, Reason: audit.ReasonCatchUp, Token: 5, By: at(3)}, false},
		{"skipped, shown skipped", skipped, audit.Range{Class: audit.Skipped, Reason: audit.ReasonOverlap, Token: 10}, true},
		{"skipped, shown missed", skipped, audit.Range{Class: audit.Missed, Reason: audit.ReasonUnaccounted}, false},
		{"skipped, shown missed while nobody led", skipped, audit.Range{Class: audit.Missed, Reason: audit.ReasonNoLeader}, false},
		{"no catch-up, covered by a later term's", noCatchUp, audit.Range{Class: audit.Covered, Reason: audit.ReasonCatchUp, Token: 20, By: at(3)}, true},
		{"no catch-up, covered by its own term", noCatchUp, audit.Range{Class: audit.Covered, Reason: audit.ReasonCatchUp, Token: 10, By: at(3)}, false},
		{"no catch-up, missed while nobody led", noCatchUp, audit.Range{Class: audit.Missed, Reason: audit.ReasonNoLeader}, true},
		{"ran and ended, no outcome recorded", ran, audit.Range{Class: audit.Lost, Reason: audit.ReasonOutcomeUnknown, Token: 10}, true},
		{"ran, no outcome, another term", ran, audit.Range{Class: audit.Lost, Reason: audit.ReasonOutcomeUnknown, Token: 20}, false},
		{"ran, shown lost as never started", ran, audit.Range{Class: audit.Lost, Reason: audit.ReasonTermEnded, Token: 10}, false},
		{"claim failed, landed and settled unknown", claimFailed, audit.Range{Class: audit.Lost, Reason: audit.ReasonOutcomeUnknown, Token: 10}, true},
		{"claim failed, settled unknown in another term", claimFailed, audit.Range{Class: audit.Lost, Reason: audit.ReasonOutcomeUnknown, Token: 20}, false},
		{"claim failed, lost with no term named", claimFailed, audit.Range{Class: audit.Lost, Reason: audit.ReasonOutcomeUnknown}, false},
		{"claim failed, shown lost as retries cut", claimFailed, audit.Range{Class: audit.Lost, Reason: audit.ReasonRetryCut, Token: 10}, false},
		{"started, frozen, cancelled on waking", frozen, audit.Range{Class: audit.Ran, Reason: audit.ReasonCancelled, Token: 10}, true},
		{"started, frozen, cancelled by another term", frozen, audit.Range{Class: audit.Ran, Reason: audit.ReasonCancelled, Token: 20}, false},
		{"started, frozen, shown failed", frozen, audit.Range{Class: audit.Ran, Reason: audit.ReasonFailed, Token: 10}, false},
		{"started, killed, shown cancelled", killed, audit.Range{Class: audit.Ran, Reason: audit.ReasonCancelled, Token: 10}, false},
		{"term over, nobody led it", termOver, audit.Range{Class: audit.Missed, Reason: audit.ReasonNoLeader}, true},
		{"term over, shown unaccounted", termOver, audit.Range{Class: audit.Missed, Reason: audit.ReasonUnaccounted}, false},
		{"ran, shown covered", ran, audit.Range{Class: audit.Covered, Reason: audit.ReasonCatchUp, Token: 20}, false},
	} {
		if res := one(c.v, c.r); res.OK() != c.ok {
			t.Errorf("%s: agree %v, want %v: %q", c.name, res.OK(), c.ok, res.Disagreements)
		}
	}
}
