package history

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// lostTermRecords is the trap-SIGTERM case of issue 28: term 10's "drain"
// run starts at 9.0 s and its term is lost at 10.2 s; the job traps the
// SIGTERM and keeps writing heartbeats for 2 s; term 20's first run
// starts at hand (s: its first record).
func lostTermRecords(s float64) []Record {
	line := 0
	rec := func(kind, job string, tok uint64, tick, sec float64) Record {
		line++
		inst := "a"
		if tok == 20 {
			inst = "b"
		}
		return Record{Kind: kind, Job: job, Tick: at(tick), Token: tok, Instance: inst, At: at(sec), Line: line}
	}
	out := []Record{rec("S", "j", 10, 9, 9.001), rec("E", "j", 10, 9, 9.01), rec("S", "drain", 10, 9, 9.002)}
	for hb := 10.3; hb < 12.25; hb += 0.25 {
		out = append(out, rec("H", "drain", 10, 9, hb))
	}
	out = append(out, rec("E", "drain", 10, 9, 12.25))
	out = append(out, rec("S", "j", 20, 12, s), rec("E", "j", 20, 12, s+0.01))
	return out
}

func TestCheck_TermOverlap(t *testing.T) {
	// Rejected: term 20 starts at 11.5 s while term 10's trapped job
	// writes heartbeats until 12.25 s. Every term other than the last is
	// checked against the earliest of the later ones.
	in := clean()
	in.Records = lostTermRecords(11.5)
	r := Check(in)
	if r.TermOverlaps != 1 || len(r.Violations) != 1 || r.Violations[0].Kind != "term-overlap" {
		t.Fatalf("overlapping terms: %d term-overlaps, violations %v; want exactly one term-overlap", r.TermOverlaps, r.Violations)
	}
	for _, want := range []string{"term 10's E record of job drain", "term 20's first record (S b of job j", "750ms of overlap"} {
		if !strings.Contains(r.Violations[0].Detail, want) {
			t.Errorf("detail %q does not say %q", r.Violations[0].Detail, want)
		}
	}
	// Passed: term 20 starts after the old job's last record.
	in.Records = lostTermRecords(12.5)
	if r := Check(in); !r.OK() {
		t.Fatalf("sequential terms: %v", r.Violations)
	}
	// A third term is checked against the furthest record of every
	// earlier term, not only the one before it.
	recs := lostTermRecords(12.5)
	recs = append(recs, Record{Kind: "S", Job: "j", Tick: at(12), Token: 15, Instance: "c", At: at(9.5), Line: 99})
	in.Records = recs
	if r := Check(in); r.TermOverlaps != 1 {
		t.Fatalf("term 15 inside term 10's run: %d term-overlaps (%v), want 1", r.TermOverlaps, r.Violations)
	}
	// Term 20 then starts at 12 s: after term 15's last record, still
	// inside term 10's trapped job (until 12.25 s).
	recs = append(lostTermRecords(12), recs[len(recs)-1])
	in.Records = recs
	if r := Check(in); r.TermOverlaps != 2 {
		t.Fatalf("terms 15 and 20 inside term 10's run: %d term-overlaps (%v), want 2", r.TermOverlaps, r.Violations)
	}
	// The order of the records in the input does not matter: a term's
	// span is from its earliest record to its latest.
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	if r := Check(in); r.TermOverlaps != 2 {
		t.Fatalf("the same records backwards: %d term-overlaps (%v), want 2", r.TermOverlaps, r.Violations)
	}
	in.Records = lostTermRecords(11.5)
	for i, j := 0, len(in.Records)-1; i < j; i, j = i+1, j-1 {
		in.Records[i], in.Records[j] = in.Records[j], in.Records[i]
	}
	if r := Check(in); r.TermOverlaps != 1 {
		t.Fatalf("overlapping terms, records backwards: %d term-overlaps (%v), want 1", r.TermOverlaps, r.Violations)
	}
}

func TestParseRecords(t *testing.T) {
	log := "S j 2026-01-01T00:00:01Z 10 a 1767225601000000000 0\n" +
		"H j 2026-01-01T00:00:01Z 10 a 1767225601500000000 -\n" +
		"R slow 2026-01-01T00:00:01Z 10 a 1767225601600000000 stale\n" +
		"X slow 2026-01-01T00:00:01Z 10 a 1767225601700000000 1\n" +
		"E j 2026-01-01T00:00:01Z 10 a 1767225602000000000 0\n"
	got, err := ParseRecords(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range got {
		kinds = append(kinds, r.Kind)
	}
	if strings.Join(kinds, "") != "SHXE" || got[1].Line != 2 || !got[3].At.Equal(at(2)) {
		t.Fatalf("parsed %+v, want S, H, X and E in line order (no R)", got)
	}
	if _, err := ParseRecords(strings.NewReader("H j bad\n")); err == nil {
		t.Error("a malformed heartbeat line parsed without error")
	}
}

func TestCheck_RunAfterAcknowledgedPause(t *testing.T) {
	// Job j is paused, acknowledged at 5.2 s, resume sent at 8.5 s; a
	// jittered run starts at 6.9 s (the reproduction's 1.5 to 2.4 s).
	in := clean()
	in.Jobs = nil // ticks not run while paused are the pause's to explain
	in.Pauses = []Pause{{Job: "j", Acked: at(5.2), Resumed: at(8.5), Via: "b"}}
	for i := range in.Starts {
		s := &in.Starts[i]
		if !s.Tick.Before(at(5)) && s.Tick.Before(at(9)) {
			s.Job = "other" // not run while paused
		}
	}
	if r := Check(in); r.AfterPause != 0 || !r.OK() {
		t.Fatalf("a pause honoured: %v", r.Violations)
	}
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(5), Token: 10, Instance: "a", At: at(6.9), Line: 100})
	r := Check(in)
	if r.AfterPause != 1 || len(r.Violations) != 1 {
		t.Fatalf("a run 1.7 s after the acknowledged pause: %d after-pause, %v; want 1", r.AfterPause, r.Violations)
	}
	if d := r.Violations[0].Detail; !strings.Contains(d, "line 100") || !strings.Contains(d, "1.7s after its pause was acknowledged by b") {
		t.Errorf("detail %q", d)
	}
	// A run started within the slack after the answer (decided before
	// it), or at or after the resume was sent, is not after the pause.
	in.Starts[len(in.Starts)-1].At = at(5.25)
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(8), Token: 10, Instance: "a", At: at(8.5), Line: 101})
	if r := Check(in); r.AfterPause != 0 {
		t.Fatalf("runs at the edges: %v", r.Violations)
	}
	// A run the node logged as started before the answer, or within the
	// slack after it, whose first line came late (a loaded machine's
	// fork), is not after the pause; one it logged later is.
	in.Starts = append(in.Starts, Start{Job: "j", Tick: at(6), Token: 10, Instance: "a", At: at(5.6), Logged: at(5.19), Line: 102})
	for _, logged := range []float64{5.19, 5.29} {
		in.Starts[len(in.Starts)-1].Logged = at(logged)
		if r := Check(in); r.AfterPause != 0 {
			t.Fatalf("a run decided at %v s, the answer at 5.2 s: %v", logged, r.Violations)
		}
	}
	in.Starts[len(in.Starts)-1].Logged = at(5.31)
	if r := Check(in); r.AfterPause != 1 {
		t.Fatalf("a run decided 110 ms after the answer: %d after-pause (%v), want 1", r.AfterPause, r.Violations)
	}
	in.Starts = in.Starts[:len(in.Starts)-1]
	// A pause never resumed holds to the end of the history: the run at
	// 8.5 s and the 11 from 9 s on are after it.
	in.Pauses[0].Resumed = time.Time{}
	if r := Check(in); r.AfterPause != 12 || !strings.Contains(r.Violations[0].Detail, "never resumed") {
		t.Fatalf("never resumed: %d after-pause (%v), want 12, saying it was never resumed", r.AfterPause, r.Violations)
	}
}

// The after-pause rule's allowance is bounded by what the suite itself
// injected, not by baton's word: a run of the paused job may start up to
// slack plus four one-way delays (the pause read and the claim, each a
// round trip) after the answer while a latency fault is on, plus the
// time its instance was frozen; one later is after the pause. A run the
// node logged as started within the slack after the answer is excused
// only while its first line follows the log by at most maxStartLag.
func TestCheck_PauseAllowanceBounded(t *testing.T) {
	in := clean()
	in.Jobs = nil
	in.Pauses = []Pause{{Job: "j", Acked: at(5.2), Resumed: at(8.5), Via: "b"}}
	for i := range in.Starts {
		if s := &in.Starts[i]; !s.Tick.Before(at(5)) && s.Tick.Before(at(9)) {
			s.Job = "other"
		}
	}
	run := Start{Job: "j", Tick: at(5), Token: 10, Instance: "a", Line: 100}
	check := func(what string, runAt float64, logged float64, faults []Fault, frozen []Interval, want int) {
		t.Helper()
		in := in
		r := run
		r.At = at(runAt)
		if logged > 0 {
			r.Logged = at(logged)
		}
		in.Starts = append(append([]Start(nil), in.Starts...), r)
		in.Faults = faults
		in.Frozen = frozen
		if rep := Check(in); rep.AfterPause != want {
			got := rep.AfterPause
			t.Errorf("%s: %d after-pause, want %d", what, got, want)
		}
	}
	lat := []Fault{{At: at(4), Kind: "latency", Target: "a", Detail: "150ms per chunk each way on the leader's proxies for 4s"},
		{At: at(8), Kind: "latency-end", Target: "a", Detail: "no delay"}}
	check("no fault, 0.5 s after", 5.7, 0, nil, nil, 1)
	// clean()'s slack is 100 ms: the allowance is 0.7 s with the latency.
	check("150 ms latency, 0.65 s after", 5.85, 0, lat, nil, 0)
	check("150 ms latency, 0.75 s after", 5.95, 0, lat, nil, 1)
	check("latency that ended 2.7 s before the pause", 5.85, 0, []Fault{{At: at(1), Kind: "latency", Detail: lat[0].Detail}, {At: at(2.5), Kind: "latency-end"}}, nil, 1)
	// Only a latency-end ends a latency: a fault of another kind between
	// them does not.
	check("latency with another fault before its end", 5.85, 0, []Fault{{At: at(1), Kind: "latency", Detail: lat[0].Detail},
		{At: at(2), Kind: "kill-follower", Detail: "pid 7"}, {At: at(8), Kind: "latency-end"}}, nil, 0)
	// Only a latency fault delays, whatever its detail says.
	check("a partition whose detail starts with a duration", 5.85, 0, []Fault{{At: at(4), Kind: "partition", Detail: "150ms"}}, nil, 1)
	check("frozen 1 s in between, 1.1 s after", 6.3, 0, nil, []Interval{{Instance: "a", From: at(5.0), To: at(6.1)}}, 0)
	check("another instance frozen", 6.3, 0, nil, []Interval{{Instance: "c", From: at(5.0), To: at(6.1)}}, 1)
	check("logged before the answer, first line 0.4 s later", 5.6, 5.19, nil, nil, 0)
	check("logged before the answer, first line 1.5 s later", 6.69, 5.19, nil, nil, 1)
}

// A run log that cannot be read is an error, not an empty history.
func TestParseRecords_ReadError(t *testing.T) {
	if rs, err := ParseRecords(iotest.ErrReader(errors.New("disk gone"))); err == nil {
		t.Errorf("ParseRecords of a failing reader: %d records, no error", len(rs))
	}
}
