package history

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A deposed term that starts a run once the next term has begun overlaps
// it as a leader, whether or not the next term had started a run by then.

// deposed is clean() in which a is deposed, not killed: b leads at
// 12.5 s, and a, cut off from the backend, runs ticks 11 and 12 (the
// latter's first line at startAt) and logs its loss at 12.6 s. b read
// tick 12 as the last claim, and runs 13 on.
func deposed(startAt float64) Input {
	in := clean()
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(12.6), Lost: at(12.6)}
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.CatchUp })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(11), Token: 10, Instance: "a", At: at(11.001), Line: 90},
		Start{Job: "j", Tick: at(12), Token: 10, Instance: "a", At: at(startAt), Line: 91})
	in.LastClaims = []LastClaim{{Instance: "b", Token: 20, Job: "j", Tick: at(12)}}
	return in
}

func TestCheck_DeposedTermStartsAfterTheNextBegan(t *testing.T) {
	if r := Check(deposed(12.45)); !r.OK() {
		t.Fatalf("a's last run 50 ms before b began: %v", r.Violations)
	}
	// a starts tick 12 50 ms after b began, within the slack of a's own
	// bound, and before b's first run (13.001 s).
	r := Check(deposed(12.55))
	if r.Overlaps != 1 || len(r.Violations) != 1 {
		t.Fatalf("a's run 50 ms after b began: %d overlaps, violations %v; want one overlap", r.Overlaps, r.Violations)
	}
	for _, want := range []string{"term 20 (b) began at " + at(12.5).Format(time.RFC3339Nano), "term 10 (a) started its last run at " + at(12.55).Format(time.RFC3339Nano) + " (line 91)"} {
		if !strings.Contains(r.Violations[0].Detail, want) {
			t.Errorf("detail %q does not say %q", r.Violations[0].Detail, want)
		}
	}
	// At the same instant is not before.
	if r := Check(deposed(12.5)); r.Overlaps != 1 {
		t.Errorf("a's run as b began: %d overlaps (%v), want 1", r.Overlaps, r.Violations)
	}
	// A term between them that ran nothing began first: c led from
	// 12.5 s and lost its lease at 12.9 s; b leads from 13.5 s, its
	// catch-up running tick 13.
	in := deposed(12.55)
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 15, Start: at(12.5), Stop: at(12.9), Lost: at(12.9)})
	in.Terms[1].Start = at(13.5)
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(13)) })
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(13), Token: 20, Instance: "b", At: at(13.51), CatchUp: true, CatchUpFrom: at(13), Line: 92})
	r = Check(in)
	if r.Overlaps != 1 || len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Detail, "term 15 (c) began at") {
		t.Fatalf("a's run after c began, c running nothing: %d overlaps, violations %v; want one overlap with c", r.Overlaps, r.Violations)
	}
	in.Starts[len(in.Starts)-2].At = at(12.45)
	if r := Check(in); !r.OK() {
		t.Fatalf("a's last run before c began: %v", r.Violations)
	}
}

// The later term's beginning is the first of its line and its first
// start (a run may start within the slack before the line); each earlier
// term is judged by its furthest start, whichever term it is; a token
// logged for two terms began with the first of them.
func TestCheck_StartOrderEdges(t *testing.T) {
	overlap := func(r Report) string { // the first overlap's detail
		for _, v := range r.Violations {
			if v.Kind == "overlap" {
				return v.Detail
			}
		}
		return ""
	}
	// b starts a run of k at 12.45 s, before its line at 12.5 s; a's last
	// run at 12.47 s.
	in := withOther(deposed(12.47))
	in.Starts = append(in.Starts, Start{Job: "k", Tick: at(12), Token: 20, Instance: "b", At: at(12.45), Line: 95})
	r := Check(in)
	if r.Overlaps != 1 || !strings.Contains(overlap(r), "term 20 (b) started a run at "+at(12.45).Format(time.RFC3339Nano)+" (line 95)") {
		t.Errorf("b's first start before a's last, both before b's line: %d overlaps, %v; want one, at b's start", r.Overlaps, r.Violations)
	}
	// a runs 1..5 and is killed at 5.2 s; c leads from 5.5 s and runs
	// 6..10; b begins at 10.0 s, before c's run of 10.
	in = clean()
	in.Terms[0].Stop = at(5.2)
	in.Terms = []Term{in.Terms[0], {Instance: "c", Token: 15, Start: at(5.5), Stop: at(10.2), Killed: true}, in.Terms[1]}
	in.Terms[2].Start = at(10)
	for i := range in.Starts {
		if s := &in.Starts[i]; s.Token == 10 && s.Tick.After(at(5)) {
			s.Token, s.Instance = 15, "c"
		}
	}
	r = Check(in)
	if r.Overlaps != 1 || !strings.Contains(overlap(r), "before term 15 (c) started its last run at "+at(10.001).Format(time.RFC3339Nano)) {
		t.Errorf("b began before c's last start: %d overlaps, %v; want one, against c", r.Overlaps, r.Violations)
	}
	// c leads from 12.4 s and starts a run at 12.45 s, inside a's (last
	// at 12.55 s); b begins at 12.5 s: both overlap a, whose starts
	// reach further than c's.
	in = deposed(12.55)
	in.Terms = append(in.Terms, Term{Instance: "c", Token: 15, Start: at(12.4), Stop: at(12.46), Lost: at(12.46)})
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(12), Token: 15, Instance: "c", At: at(12.45), Line: 96})
	if r := Check(in); r.Overlaps != 2 {
		t.Errorf("c and b each began before a's last start: %d overlaps, %v; want 2", r.Overlaps, r.Violations)
	}
	// Token 15 logged for x at 12.4 s and again for y at 13 s: a's run at
	// 12.45 s came after x began.
	in = deposed(12.45)
	in.Terms = append(in.Terms, Term{Instance: "x", Token: 15, Start: at(12.4), Stop: at(12.45), Lost: at(12.45)},
		Term{Instance: "y", Token: 15, Start: at(13), Stop: at(13.05), Lost: at(13.05)})
	r = Check(in)
	if r.Overlaps != 1 || !strings.Contains(overlap(r), "term 15 (x) began at "+at(12.4).Format(time.RFC3339Nano)) {
		t.Errorf("a's run after the first term with token 15 began: %d overlaps, %v; want one, against x", r.Overlaps, r.Violations)
	}
}
