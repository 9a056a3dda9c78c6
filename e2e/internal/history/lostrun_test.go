package history

import (
	"strings"
	"testing"
	"time"
)

// A run of a lost term that writes any line, its end line included, once
// the next term's runs have begun executes beside them.

// lostRunEndsLate is clean() in which a's term is lost at 10.2 s (not
// killed) during its run of tick 10: the job's heartbeats (Records) go on
// until 12.0 s, and its end line comes at endAt. b's first run starts at
// 12.51 s. Every other run ends 5 ms after it starts.
func lostRunEndsLate(endAt float64) Input {
	in := clean()
	in.Terms[0] = Term{Instance: "a", Token: 10, Start: at(0.5), Stop: at(10.2), Lost: at(10.2)}
	for _, s := range in.Starts {
		e := End{Job: s.Job, Tick: s.Tick, Token: s.Token, Instance: s.Instance, At: s.At.Add(5 * time.Millisecond), Line: s.Line + 100}
		if s.Token == 10 && s.Tick.Equal(at(10)) {
			e.At = at(endAt)
		}
		in.Ends = append(in.Ends, e)
	}
	for hb := 10.25; hb <= 12; hb += 0.25 {
		in.Records = append(in.Records, Record{Kind: "H", Job: "j", Tick: at(10), Token: 10, Instance: "a", At: at(hb), Line: 200})
	}
	return in
}

func TestCheck_LostTermsRunEndsAfterTheNextTermsRuns(t *testing.T) {
	if r := Check(lostRunEndsLate(12.4)); !r.OK() {
		t.Fatalf("a's run ended before b's first: %v", r.Violations)
	}
	// The end line comes 240 ms after b's first run started; the
	// heartbeats all came before it.
	r := Check(lostRunEndsLate(12.75))
	if r.TermOverlaps != 1 || len(r.Violations) != 1 {
		t.Fatalf("a's run ending after b's first began: %d term-overlaps, violations %v; want one", r.TermOverlaps, r.Violations)
	}
	for _, want := range []string{"term 10's E record of job j tick " + at(10).Format(time.RFC3339), "term 20's first record (S b of job j, line 11)", "240ms of overlap"} {
		if !strings.Contains(r.Violations[0].Detail, want) {
			t.Errorf("detail %q does not say %q", r.Violations[0].Detail, want)
		}
	}
	// At the same instant is not before; with no Records at all, the S
	// and E lines alone show it.
	if r := Check(lostRunEndsLate(12.51)); r.TermOverlaps != 1 {
		t.Errorf("a's run ending as b's began: %d term-overlaps (%v), want 1", r.TermOverlaps, r.Violations)
	}
	in := lostRunEndsLate(12.75)
	in.Records = nil
	if r := Check(in); r.TermOverlaps != 1 {
		t.Errorf("no Records, the end line late: %d term-overlaps (%v), want 1", r.TermOverlaps, r.Violations)
	}
	// A heartbeat of b's term (Records) before its first S line is its
	// first record.
	in = lostRunEndsLate(12.4)
	in.Records = append(in.Records, Record{Kind: "H", Job: "j", Tick: at(12), Token: 20, Instance: "b", At: at(12.3), Line: 201})
	if r := Check(in); r.TermOverlaps != 1 {
		t.Errorf("b's heartbeat at 12.3 s before a's end: %d term-overlaps (%v), want 1", r.TermOverlaps, r.Violations)
	}
}
