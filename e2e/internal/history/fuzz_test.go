package history

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzParseRunLog: on arbitrary bytes ParseRunLog and ParseEnds never
// panic; what they parse, written back as a run log and parsed again,
// gives the same starts and ends.
func FuzzParseRunLog(f *testing.F) {
	f.Add([]byte("S j 2026-01-01T00:00:01Z 10 a 1767225601001000000 0\nE j 2026-01-01T00:00:01Z 10 a 1767225601100000000 ok\nS j 2026-01-01T00:00:02Z 20 b 1767225602001000000 1\n"))
	f.Add([]byte("S j bad\n"))
	f.Add([]byte("S j 2026-01-01T00:00:01.5+05:30 18446744073709551615 a -9223372036854775808 1\n\nE x 9999-12-31T23:59:59Z 0 b 0 failed\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		starts, serr := ParseRunLog(strings.NewReader(string(data)))
		ends, eerr := ParseEnds(strings.NewReader(string(data)))
		var b strings.Builder
		for _, s := range starts {
			c := catchUpField(s)
			fmt.Fprintf(&b, "S %s %s %d %s %d %s\n", s.Job, s.Tick.Format(time.RFC3339Nano), s.Token, s.Instance, s.At.UnixNano(), c)
		}
		for _, e := range ends {
			fmt.Fprintf(&b, "E %s %s %d %s %d ok\n", e.Job, e.Tick.Format(time.RFC3339Nano), e.Token, e.Instance, e.At.UnixNano())
		}
		if serr == nil {
			again, err := ParseRunLog(strings.NewReader(b.String()))
			if err != nil || len(again) != len(starts) {
				t.Fatalf("starts written back: %v, %d of %d\n%s", err, len(again), len(starts), b.String())
			}
			for i, s := range starts {
				a := again[i]
				if a.Job != s.Job || !a.Tick.Equal(s.Tick) || a.Token != s.Token || a.Instance != s.Instance || !a.At.Equal(s.At) || a.CatchUp != s.CatchUp ||
					!a.CatchUpFrom.Equal(s.CatchUpFrom) {
					t.Fatalf("start %d: %+v, written back and parsed %+v", i, s, a)
				}
			}
		}
		if eerr == nil {
			again, err := ParseEnds(strings.NewReader(b.String()))
			if err != nil || len(again) != len(ends) {
				t.Fatalf("ends written back: %v, %d of %d\n%s", err, len(again), len(ends), b.String())
			}
			for i, e := range ends {
				a := again[i]
				if a.Job != e.Job || !a.Tick.Equal(e.Tick) || a.Token != e.Token || a.Instance != e.Instance || !a.At.Equal(e.At) {
					t.Fatalf("end %d: %+v, written back and parsed %+v", i, e, a)
				}
			}
		}
	})
}

// genHistory builds a history with no violation from r: terms one after
// another (each killed, or released gracefully after a step-down, the
// last possibly open), each running the ticks of its time on the second
// (job j, @every 1s, run-once) and at its start one catch-up for the ticks
// since the previous term stopped, after it read the previous term's last
// tick as the last claim; every run ends 5 ms after it starts.
func genHistory(r *rand.Rand, nTerms int) Input {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	in := Input{
		Jobs:         map[string]Policy{"j": {Every: time.Second, Misfire: "run-once", Grace: 5 * time.Second}},
		From:         t0,
		Slack:        100 * time.Millisecond,
		ClaimTimeout: 5 * time.Second,
		Ends:         []End{},
	}
	line := 0
	run := func(inst string, tok uint64, tick, at time.Time, catchUp bool) {
		line++
		in.Starts = append(in.Starts, Start{Job: "j", Tick: tick, Token: tok, Instance: inst, At: at, CatchUp: catchUp, Line: line})
		in.Ends = append(in.Ends, End{Job: "j", Tick: tick, Token: tok, Instance: inst, At: at.Add(ms(5)), Line: line})
	}
	insts := []string{"a", "b", "c"}
	prevStop, prevEnd, tok := t0, t0, uint64(0)
	for i := range nTerms {
		start := prevStop.Truncate(time.Second).Add(time.Duration(r.IntN(4))*time.Second + ms(150+r.IntN(700)))
		if !start.After(prevEnd) { // a term begins after the last one ended
			start = prevEnd.Add(ms(1 + r.IntN(50)))
		}
		tok += 1 + uint64(r.IntN(5))
		tm := Term{Instance: insts[r.IntN(len(insts))], Token: tok, Start: start}
		if i > 0 { // its catch-up's line: the last claim is the previous term's last tick
			in.LastClaims = append(in.LastClaims, LastClaim{Instance: tm.Instance, Token: tok, Job: "j", Tick: prevStop.Truncate(time.Second)})
		}
		// Catch-up: the last tick in (prevStop, start], if any, standing
		// for every tick since the previous term's last.
		if last := start.Truncate(time.Second); last.After(prevStop) {
			run(tm.Instance, tok, last, start.Add(ms(10)), true)
			in.Starts[len(in.Starts)-1].CatchUpFrom = prevStop.Truncate(time.Second).Add(time.Second)
		}
		n := 1 + r.IntN(8)
		tick := start.Truncate(time.Second).Add(time.Second)
		for range n {
			run(tm.Instance, tok, tick, tick.Add(ms(1)), false)
			tick = tick.Add(time.Second)
		}
		stop := tick.Add(-time.Second).Add(ms(150 + r.IntN(700)))
		switch {
		case i == nTerms-1 && r.IntN(2) == 0:
			// Still open: the window ends at its last tick.
			in.To = tick.Add(-time.Second)
		case r.IntN(2) == 0:
			tm.Stop, tm.Killed = stop, true
			in.Faults = append(in.Faults, Fault{At: stop, Kind: "kill-leader", Target: tm.Instance})
		default:
			tm.Stop, tm.End, tm.Graceful, tm.SteppedDown = stop, stop.Add(ms(20)), true, true
		}
		in.Terms = append(in.Terms, tm)
		prevStop, prevEnd = stop, stop
		if !tm.End.IsZero() {
			prevEnd = tm.End
		}
		if in.To.IsZero() || in.To.Before(stop) {
			in.To = stop.Truncate(time.Second)
		}
	}
	in.Records = records(in.Starts, in.Ends)
	return in
}

// catchUpField is the last field of s's start line: 0, or for a catch-up
// run the first tick it stands for, or 1 if it does not say.
func catchUpField(s Start) string {
	switch {
	case !s.CatchUp:
		return "0"
	case s.CatchUpFrom.IsZero():
		return "1"
	}
	return s.CatchUpFrom.Format(time.RFC3339Nano)
}

// records are the S and E records of starts and ends, as the run log
// gives them.
func records(starts []Start, ends []End) []Record {
	var out []Record
	for _, s := range starts {
		out = append(out, Record{Kind: "S", Job: s.Job, Tick: s.Tick, Token: s.Token, Instance: s.Instance, At: s.At, Line: s.Line})
	}
	for _, e := range ends {
		out = append(out, Record{Kind: "E", Job: e.Job, Tick: e.Tick, Token: e.Token, Instance: e.Instance, At: e.At, Line: e.Line})
	}
	return out
}

// injection is a fault put into a clean history, and how the report
// counts it.
type injection struct {
	kind   string
	inject func(r *rand.Rand, in *Input) bool // false: this history has no place for it
	count  func(Report) int
}

// injections are the faults FuzzCheck puts into clean histories; the
// checker must report each one. They change a copy (see clone).
var injections = []injection{
	{"lost-tick", func(r *rand.Rand, in *Input) bool {
		// A term's run of a tick, not its catch-up, goes: the term was
		// live and neither ran it nor logged why (see removable).
		i := pick(r, len(in.Starts), func(i int) bool { return removable(in, i) })
		if i < 0 {
			return false
		}
		dropStart(in, i)
		return true
	}, func(rep Report) int { return rep.LostTicks }},
	{"term-overlap", func(r *rand.Rand, in *Input) bool {
		// A run of an earlier term writes a line after the next term's
		// first line.
		i := pick(r, len(in.Starts), func(i int) bool { return nextStart(in, in.Starts[i].Token) != nil })
		if i < 0 {
			return false
		}
		s, n := in.Starts[i], nextStart(in, in.Starts[i].Token)
		in.Records = append(in.Records, Record{Kind: "H", Job: s.Job, Tick: s.Tick, Token: s.Token, Instance: s.Instance, At: n.At.Add(time.Millisecond)})
		return true
	}, func(rep Report) int { return rep.TermOverlaps }},
	{"term-overlap", func(r *rand.Rand, in *Input) bool {
		// A run of an earlier term ends after the next term's first
		// start, and the history keeps only the S and E lines.
		i := pick(r, len(in.Starts), func(i int) bool { return nextStart(in, in.Starts[i].Token) != nil })
		if i < 0 {
			return false
		}
		in.Ends[i].At = nextStart(in, in.Starts[i].Token).At.Add(time.Millisecond)
		in.Records = nil
		return true
	}, func(rep Report) int { return rep.TermOverlaps }},
	{"outside-term", func(r *rand.Rand, in *Input) bool {
		// A deposed term starts a run after the next term's first start.
		i := pick(r, len(in.Starts), func(i int) bool { return nextStart(in, in.Starts[i].Token) != nil })
		if i < 0 {
			return false
		}
		s, n := in.Starts[i], nextStart(in, in.Starts[i].Token)
		s.Job, s.At, s.Line = "x", n.At.Add(time.Millisecond), len(in.Starts)+1
		s.Tick = s.At.Truncate(time.Second)
		in.Starts = append(in.Starts, s)
		in.Ends = append(in.Ends, End{Job: s.Job, Tick: s.Tick, Token: s.Token, Instance: s.Instance, At: s.At.Add(time.Millisecond), Line: s.Line})
		return true
	}, func(rep Report) int { return rep.OutsideTerm }},
	{"overlap", func(r *rand.Rand, in *Input) bool {
		// A deposed term starts a run as the next term begins, before
		// that term's first start.
		if len(in.Terms) < 2 {
			return false
		}
		i := r.IntN(len(in.Terms) - 1)
		d, n := in.Terms[i], in.Terms[i+1]
		at := n.Start
		in.Starts = append(in.Starts, Start{Job: "x", Tick: at.Truncate(time.Second), Token: d.Token, Instance: d.Instance, At: at, Line: len(in.Starts) + 1})
		in.Ends = append(in.Ends, End{Job: "x", Tick: at.Truncate(time.Second), Token: d.Token, Instance: d.Instance, At: at, Line: len(in.Starts)})
		return true
	}, func(rep Report) int { return rep.Overlaps }},
	{"early-start", func(r *rand.Rand, in *Input) bool {
		// A scheduled run writes its first line before its tick.
		i := pick(r, len(in.Starts), func(i int) bool { return !in.Starts[i].CatchUp })
		if i < 0 {
			return false
		}
		in.Starts[i].At = in.Starts[i].Tick.Add(-time.Millisecond)
		return true
	}, func(rep Report) int { return rep.EarlyStarts }},
	{"drain", func(r *rand.Rand, in *Input) bool {
		// A run of a graceful term ends after the release.
		i := pick(r, len(in.Starts), func(i int) bool { return termOf(in, in.Starts[i].Token).Graceful })
		if i < 0 {
			return false
		}
		in.Ends[i].At = termOf(in, in.Starts[i].Token).End.Add(time.Millisecond)
		return true
	}, func(rep Report) int { return rep.Drains }},
	{"catch-up-cover", func(r *rand.Rand, in *Input) bool {
		// A catch-up run says it stands for a tick after its own.
		i := pick(r, len(in.Starts), func(i int) bool { return in.Starts[i].CatchUp })
		if i < 0 {
			return false
		}
		in.Starts[i].CatchUpFrom = in.Starts[i].Tick.Add(time.Second)
		return true
	}, func(rep Report) int { return rep.CatchUpCovers }},
	{"slow-failover", func(r *rand.Rand, in *Input) bool {
		// The bound is a millisecond short of a crash failover.
		for i, tm := range in.Terms[:len(in.Terms)-1] {
			if d := in.Terms[i+1].Start.Sub(tm.Stop); tm.Killed && d > time.Millisecond {
				in.CrashBound = d - time.Millisecond
				return true
			}
		}
		return false
	}, func(rep Report) int { return rep.SlowFailovers }},
}

// pick returns a random index below n for which ok holds, or -1.
func pick(r *rand.Rand, n int, ok func(int) bool) int {
	var is []int
	for i := range n {
		if ok(i) {
			is = append(is, i)
		}
	}
	if len(is) == 0 {
		return -1
	}
	return is[r.IntN(len(is))]
}

// termOf returns the term with token tok (genHistory's tokens are unique).
func termOf(in *Input, tok uint64) Term {
	for _, t := range in.Terms {
		if t.Token == tok {
			return t
		}
	}
	return Term{}
}

// nextStart returns the first start of the term after the one with token
// tok, nil if there is none.
func nextStart(in *Input, tok uint64) *Start {
	var next *Start
	for i, s := range in.Starts {
		if s.Token > tok && (next == nil || s.Token < next.Token || (s.Token == next.Token && s.At.Before(next.At))) {
			next = &in.Starts[i]
		}
	}
	return next
}

// clone copies in's slices, so that an injection changes only the copy.
func clone(in Input) Input {
	in.Starts = slices.Clone(in.Starts)
	in.Ends = slices.Clone(in.Ends)
	in.Terms = slices.Clone(in.Terms)
	in.Records = slices.Clone(in.Records)
	in.Misfires = slices.Clone(in.Misfires)
	in.LastClaims = slices.Clone(in.LastClaims)
	in.Asked = slices.Clone(in.Asked)
	in.Frozen = slices.Clone(in.Frozen)
	return in
}

// counts is a Report without the order-dependent texts.
func counts(r Report) Report {
	r.Violations = nil
	return r
}

// FuzzCheck: on histories with no violation (genHistory) the checker says
// OK; its verdict does not change when the starts, ends and terms come in
// another order, nor when the starts and ends go through the run log
// format and back; each fault of injections put into the history is
// reported; a start run again by another term is one duplicate.
func FuzzCheck(f *testing.F) {
	for i := range 8 {
		f.Add(uint64(i), uint64(i*7919), uint8(i%5+1))
	}
	f.Fuzz(func(t *testing.T, s1, s2 uint64, nTerms uint8) {
		r := rand.New(rand.NewPCG(s1, s2))
		in := genHistory(r, 1+int(nTerms%6))
		rep := Check(in)
		if !rep.OK() {
			t.Fatalf("violations in a clean history: %v\n%+v", rep.Violations, in)
		}
		// Another order.
		sh := in
		sh.Starts = append([]Start(nil), in.Starts...)
		sh.Ends = append([]End(nil), in.Ends...)
		sh.Terms = append([]Term(nil), in.Terms...)
		r.Shuffle(len(sh.Starts), func(i, j int) { sh.Starts[i], sh.Starts[j] = sh.Starts[j], sh.Starts[i] })
		r.Shuffle(len(sh.Ends), func(i, j int) { sh.Ends[i], sh.Ends[j] = sh.Ends[j], sh.Ends[i] })
		r.Shuffle(len(sh.Terms), func(i, j int) { sh.Terms[i], sh.Terms[j] = sh.Terms[j], sh.Terms[i] })
		if got := Check(sh); !reflect.DeepEqual(counts(got), counts(rep)) {
			t.Fatalf("shuffled: %+v, in order %+v", got, rep)
		}
		// Through the run log.
		var b strings.Builder
		for i, s := range in.Starts {
			c := catchUpField(s)
			fmt.Fprintf(&b, "S %s %s %d %s %d %s\n", s.Job, s.Tick.Format(time.RFC3339Nano), s.Token, s.Instance, s.At.UnixNano(), c)
			e := in.Ends[i]
			fmt.Fprintf(&b, "E %s %s %d %s %d ok\n", e.Job, e.Tick.Format(time.RFC3339Nano), e.Token, e.Instance, e.At.UnixNano())
		}
		parsed := in
		var err error
		if parsed.Starts, err = ParseRunLog(strings.NewReader(b.String())); err != nil {
			t.Fatal(err)
		}
		if parsed.Ends, err = ParseEnds(strings.NewReader(b.String())); err != nil {
			t.Fatal(err)
		}
		if got := Check(parsed); !reflect.DeepEqual(counts(got), counts(rep)) {
			t.Fatalf("through the run log: %+v, directly %+v", got, rep)
		}
		// Each injected fault is reported.
		for _, inj := range slices.Concat(injections, excuseInjections) {
			if bad, got, ok := inj.apply(r, in); ok && inj.count(got) == 0 {
				t.Fatalf("%s injected, not reported: %v\nterms %+v", inj.kind, got.Violations, bad.Terms)
			}
		}
		// A duplicate: a later term runs an earlier term's tick.
		if len(in.Terms) > 1 {
			last := in.Terms[len(in.Terms)-1]
			dup := in
			s := in.Starts[r.IntN(len(in.Starts))]
			if s.Token != last.Token {
				s.Token, s.Instance, s.At, s.Line = last.Token, last.Instance, last.Start.Add(20*time.Millisecond), len(in.Starts)+1
				dup.Starts = append(append([]Start(nil), in.Starts...), s)
				if got := Check(dup); got.Duplicates != 1 {
					t.Fatalf("one duplicate: %d duplicates, %v", got.Duplicates, got.Violations)
				}
			}
		}
	})
}
