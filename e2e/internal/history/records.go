package history

import (
	"bytes"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// Record is one line a job's own process (or the application a sidecar
// calls) wrote while a run executed: its start ("S"), a heartbeat ("H"),
// a side effect the fence accepted ("X"), its end ("E"). The lines share
// the start line's format; the last field is free.
type Record struct {
	Kind     string
	Job      string
	Tick     time.Time
	Token    uint64
	Instance string
	At       time.Time
	Line     int
}

// RecordKinds are the kinds of line ParseRecords reads: the lines that
// show a run executing. A refused side effect ("R") shows none and is
// not read.
var RecordKinds = []string{"S", "H", "X", "E"}

// ParseRecords reads every line of rd whose kind is in RecordKinds.
func ParseRecords(rd io.Reader) ([]Record, error) {
	var out []Record
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, err
	}
	for _, k := range RecordKinds {
		rs, err := parseRunLines(bytes.NewReader(b), k, "time", func(l runLine) Record {
			return Record{Kind: k, Job: l.job, Tick: l.tick, Token: l.token, Instance: l.instance, At: l.at, Line: l.line}
		})
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out, nil
}

// Pause is a pause of a job as the operator saw it: the instant its
// answer 200 was received, and the instant the resume that ended it was
// sent (zero: not resumed in the history).
type Pause struct {
	Job     string
	Acked   time.Time
	Resumed time.Time
	Via     string // the instance that answered, for the report
}

// runLines returns every line the jobs wrote while their runs executed:
// the Records, and the S and E lines (Starts, Ends), which a history may
// hold without them.
func runLines(in Input) []Record {
	out := slices.Clip(in.Records)
	for _, s := range in.Starts {
		out = append(out, Record{Kind: "S", Job: s.Job, Tick: s.Tick, Token: s.Token, Instance: s.Instance, At: s.At, Line: s.Line})
	}
	for _, e := range in.Ends {
		out = append(out, Record{Kind: "E", Job: e.Job, Tick: e.Tick, Token: e.Token, Instance: e.Instance, At: e.At, Line: e.Line})
	}
	return out
}

// checkTermOverlap enforces that runs of different terms never execute
// at the same time, from the jobs' own records: ordered by token, every
// record of an earlier term comes before the first record of a later
// term. A violation names the later term's first record and the earlier
// term's latest record after it.
func checkTermOverlap(r *Report, recs []Record) {
	ordered := spansByToken(recs, func(r Record) (uint64, time.Time) { return r.Token, r.At })
	// latest is the earlier term whose records reach furthest.
	var latest *tokenSpan[Record]
	for _, b := range ordered {
		if latest != nil && !b.first.At.After(latest.last.At) {
			a := latest.last
			r.add("term-overlap", "term %d's %s record of job %s tick %s (%s, line %d) at %s is not before term %d's first record (%s %s of job %s, line %d) at %s: %v of overlap",
				latest.token, a.Kind, a.Job, a.Tick.Format(time.RFC3339), a.Instance, a.Line, a.At.Format(time.RFC3339Nano),
				b.token, b.first.Kind, b.first.Instance, b.first.Job, b.first.Line, b.first.At.Format(time.RFC3339Nano),
				a.At.Sub(b.first.At))
		}
		if latest == nil || b.last.At.After(latest.last.At) {
			latest = b
		}
	}
}

// maxStartLag bounds the time from a node's "run started" record to the
// job's first line (fork and exec on a loaded machine) for the
// after-pause rule's excuse of a run decided before the answer.
const maxStartLag = time.Second

// checkPauses enforces that no run of a job starts, by its own first
// record, after a pause of the job was acknowledged and before the
// resume that ended it was sent, beyond an allowance: the slack, plus
// four one-way delays of a latency fault the suite injected around it
// (the pause read and the claim, each a round trip), plus the time the
// run's instance was frozen (SIGSTOP, or the whole machine: Instance
// empty) across it. A pause read an instant
// before the answer may let a run start after it; the allowance is that
// window's own bound, from the suite's faults, not from baton's log. A
// run its node logged as started within the slack after the answer
// (Start.Logged) is excused while its first line came at most
// maxStartLag after that record.
func checkPauses(r *Report, starts []Start, pauses []Pause, slack time.Duration, faults []Fault, frozen []Interval) {
	delays := latencySpans(faults)
	for _, p := range pauses {
		for _, s := range starts {
			if s.Job != p.Job || (!p.Resumed.IsZero() && !s.At.Before(p.Resumed)) {
				continue
			}
			from := p.Acked.Add(-2 * time.Second)
			allow := slack
			var delay time.Duration
			for _, d := range delays {
				if d.from.Before(s.At) && d.to.After(from) {
					delay = max(delay, d.delay)
				}
			}
			allow += 4 * delay
			for _, f := range frozen {
				if (f.Instance == s.Instance || f.Instance == "") && f.From.Before(s.At) && f.To.After(from) {
					allow += f.To.Sub(f.From)
				}
			}
			if !s.At.After(p.Acked.Add(allow)) {
				continue
			}
			if !s.Logged.IsZero() && !s.Logged.After(p.Acked.Add(slack)) && !s.At.After(s.Logged.Add(maxStartLag)) {
				continue
			}
			resumed := "never resumed"
			if !p.Resumed.IsZero() {
				resumed = "resume sent " + p.Resumed.Format(time.RFC3339Nano)
			}
			r.add("after-pause", "line %d: %s started job %s tick %s (token %d) at %s, %v after its pause was acknowledged by %s at %s (%s; allowance %v)",
				s.Line, s.Instance, s.Job, s.Tick.Format(time.RFC3339), s.Token, s.At.Format(time.RFC3339Nano),
				s.At.Sub(p.Acked), p.Via, p.Acked.Format(time.RFC3339Nano), resumed, allow)
		}
	}
}

// latencySpan is a latency fault: delay per chunk each way, from..to.
type latencySpan struct {
	from, to time.Time
	delay    time.Duration
}

// latencySpans reads the latency faults of the timeline: a "latency"
// fault whose detail begins with its delay, until the next
// "latency-end" (or forever, if none came).
func latencySpans(faults []Fault) []latencySpan {
	var out []latencySpan
	for i, f := range faults {
		if f.Kind != "latency" {
			continue
		}
		word, _, _ := strings.Cut(f.Detail, " ")
		d, err := time.ParseDuration(word)
		if err != nil {
			continue
		}
		sp := latencySpan{from: f.At, to: time.Unix(1<<40, 0), delay: d}
		for _, g := range faults[i+1:] {
			if g.Kind == "latency-end" && !g.At.Before(f.At) {
				sp.to = g.At
				break
			}
		}
		out = append(out, sp)
	}
	return out
}

// tokenSpan is one term's earliest and latest item, by its time.
type tokenSpan[T any] struct {
	token       uint64
	first, last T
}

// spansByToken groups items by the token of their term (key gives it,
// and the item's time) and returns each term's span, in token order.
func spansByToken[T any](items []T, key func(T) (uint64, time.Time)) []*tokenSpan[T] {
	spans := map[uint64]*tokenSpan[T]{}
	for _, it := range items {
		token, at := key(it)
		sp := spans[token]
		if sp == nil {
			spans[token] = &tokenSpan[T]{token: token, first: it, last: it}
			continue
		}
		if _, first := key(sp.first); at.Before(first) {
			sp.first = it
		}
		if _, last := key(sp.last); at.After(last) {
			sp.last = it
		}
	}
	ordered := make([]*tokenSpan[T], 0, len(spans))
	for _, sp := range spans {
		ordered = append(ordered, sp)
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].token < ordered[j].token })
	return ordered
}
