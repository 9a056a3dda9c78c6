// Package history checks what a cluster did against baton's guarantees,
// from records kept outside baton: one line appended by the job itself at
// the start and at the end of each run, and each node's log of the terms
// it held. It never reads baton's own ledger.
package history

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Start is one run as the job recorded it when it started.
type Start struct {
	Job      string
	Tick     time.Time // nominal tick (BATON_TICK)
	Token    uint64
	Instance string
	At       time.Time // wall clock when the run started
	CatchUp  bool
	Line     int // line in the run log, for reports
}

// Term is one term as a node logged it.
type Term struct {
	Instance string
	Token    uint64
	Start    time.Time // "acquired leadership"
	Stop     time.Time // first of: stepping down, lost, released, or the process's death; zero if still open
	End      time.Time // lease released or lost; zero if still open or unknown (killed)
	Graceful bool      // ended by a release after a step-down
	Killed   bool      // the node was killed during the term
}

// Fault is one injected fault, for the report.
type Fault struct {
	At     time.Time
	Kind   string
	Target string
}

// Policy is what the checker needs to know of a job.
type Policy struct {
	Every   time.Duration // the job runs on a fixed period ("@every")
	Misfire string        // skip, run-once, run-all
	Grace   time.Duration
}

// Input is everything the checker looks at.
type Input struct {
	Starts []Start
	Terms  []Term
	Faults []Fault
	Jobs   map[string]Policy
	// From and To bound the window in which every tick must be accounted
	// for (ticks near the edges are not judged).
	From, To time.Time
	// HandoverBound is the longest allowed time from a graceful release to
	// the next term's start.
	HandoverBound time.Duration
	// Slack absorbs the time between a decision and its log line.
	Slack time.Duration
}

// Violation is one broken guarantee.
type Violation struct {
	Kind   string // duplicate, overlap, token-order, outside-term, lost-tick, slow-handover
	Detail string
}

func (v Violation) String() string { return v.Kind + ": " + v.Detail }

// Report is the checker's result.
type Report struct {
	Runs          int
	Terms         int
	Duplicates    int
	Overlaps      int
	OutsideTerm   int
	TokenOrder    int
	LostTicks     int
	SlowHandovers int
	MaxHandover   time.Duration // graceful: release to the next term
	MaxFailover   time.Duration // non-graceful: last sign of the old term to the next term
	Violations    []Violation
}

// OK reports whether no guarantee was broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

func (r *Report) add(kind, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	switch kind {
	case "duplicate":
		r.Duplicates++
	case "overlap":
		r.Overlaps++
	case "outside-term":
		r.OutsideTerm++
	case "token-order":
		r.TokenOrder++
	case "lost-tick":
		r.LostTicks++
	case "slow-handover":
		r.SlowHandovers++
	}
}

type tickID struct {
	job  string
	tick int64
}

// Check judges in against every guarantee and returns what it found.
func Check(in Input) Report {
	r := Report{Runs: len(in.Starts), Terms: len(in.Terms)}
	terms := append([]Term(nil), in.Terms...)
	sort.Slice(terms, func(i, j int) bool { return terms[i].Start.Before(terms[j].Start) })

	// 1. No tick started twice.
	first := map[tickID]Start{}
	for _, s := range in.Starts {
		id := tickID{s.Job, s.Tick.UnixNano()}
		if prev, dup := first[id]; dup {
			r.add("duplicate", "job %s tick %s started twice: line %d (%s token %d) and line %d (%s token %d)",
				s.Job, s.Tick.Format(time.RFC3339Nano), prev.Line, prev.Instance, prev.Token, s.Line, s.Instance, s.Token)
			continue
		}
		first[id] = s
	}

	// 2. Tokens strictly increase with term starts.
	for i := 1; i < len(terms); i++ {
		if terms[i].Token <= terms[i-1].Token {
			r.add("token-order", "term of %s started %s with token %d, not above the earlier term of %s (token %d, started %s)",
				terms[i].Instance, terms[i].Start.Format(time.RFC3339Nano), terms[i].Token,
				terms[i-1].Instance, terms[i-1].Token, terms[i-1].Start.Format(time.RFC3339Nano))
		}
	}

	// 3. Every start lies within a term of its instance with its token.
	byToken := map[uint64]Term{}
	for _, t := range terms {
		byToken[t.Token] = t
	}
	for _, s := range in.Starts {
		t, ok := byToken[s.Token]
		switch {
		case !ok:
			r.add("outside-term", "line %d: %s started job %s tick %s with token %d, which no node logged as a term",
				s.Line, s.Instance, s.Job, s.Tick.Format(time.RFC3339Nano), s.Token)
		case t.Instance != s.Instance:
			r.add("outside-term", "line %d: %s started job %s with token %d, which is %s's term", s.Line, s.Instance, s.Job, s.Token, t.Instance)
		case s.At.Before(t.Start.Add(-in.Slack)) || (!t.Stop.IsZero() && s.At.After(t.Stop.Add(in.Slack))):
			r.add("outside-term", "line %d: %s started job %s at %s, outside its term %d [%s, %s]", s.Line, s.Instance, s.Job,
				s.At.Format(time.RFC3339Nano), s.Token, t.Start.Format(time.RFC3339Nano), stamp(t.Stop))
		}
	}

	// 4. No two terms overlap in job starts: ordered by token, the starts
	// of one term all come before the starts of the next.
	type span struct {
		token       uint64
		first, last Start
	}
	spans := map[uint64]*span{}
	for _, s := range in.Starts {
		sp := spans[s.Token]
		if sp == nil {
			spans[s.Token] = &span{token: s.Token, first: s, last: s}
			continue
		}
		if s.At.Before(sp.first.At) {
			sp.first = s
		}
		if s.At.After(sp.last.At) {
			sp.last = s
		}
	}
	ordered := make([]*span, 0, len(spans))
	for _, sp := range spans {
		ordered = append(ordered, sp)
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].token < ordered[j].token })
	for i := 1; i < len(ordered); i++ {
		a, b := ordered[i-1], ordered[i]
		if !b.first.At.After(a.last.At) {
			r.add("overlap", "term %d (%s) started a run at %s (line %d), before term %d (%s) started its last at %s (line %d)",
				b.token, b.first.Instance, b.first.At.Format(time.RFC3339Nano), b.first.Line,
				a.token, a.last.Instance, a.last.At.Format(time.RFC3339Nano), a.last.Line)
		}
	}

	// 5. Handover and failover times.
	for i := 1; i < len(terms); i++ {
		prev, next := terms[i-1], terms[i]
		if prev.Graceful && !prev.End.IsZero() {
			d := next.Start.Sub(prev.End)
			r.MaxHandover = max(r.MaxHandover, d)
			if in.HandoverBound > 0 && d > in.HandoverBound {
				r.add("slow-handover", "%s released term %d at %s; %s led only %v later (bound %v)",
					prev.Instance, prev.Token, prev.End.Format(time.RFC3339Nano), next.Instance, d, in.HandoverBound)
			}
		} else if !prev.Stop.IsZero() {
			r.MaxFailover = max(r.MaxFailover, next.Start.Sub(prev.Stop))
		}
	}

	// 6. Every tick in the window is run or accounted for by the policy.
	for job, p := range in.Jobs {
		if p.Every <= 0 {
			continue
		}
		checkTicks(&r, in, terms, job, p, first)
	}
	return r
}

// checkTicks accounts for every tick of a fixed-period job in the window.
func checkTicks(r *Report, in Input, terms []Term, job string, p Policy, first map[tickID]Start) {
	ran := func(t time.Time) bool {
		_, ok := first[tickID{job, t.UnixNano()}]
		return ok
	}
	// Catch-up runs of this job, by the term they ran in.
	var catchUps []Start
	for _, s := range in.Starts {
		if s.Job == job && s.CatchUp {
			catchUps = append(catchUps, s)
		}
	}
	from := in.From.Truncate(p.Every).Add(p.Every)
	for t := from; !t.After(in.To); t = t.Add(p.Every) {
		if ran(t) {
			continue
		}
		// A tick is run directly only if some term was live, not stopping,
		// from the tick until a little after it.
		live := false
		for _, tm := range terms {
			if !tm.Start.After(t.Add(-in.Slack)) && (tm.Stop.IsZero() || tm.Stop.After(t.Add(in.Slack))) {
				live = true
				break
			}
		}
		// Otherwise: the next term to start after t decides.
		var next *Term
		for i := range terms {
			if terms[i].Start.After(t.Add(-in.Slack)) {
				next = &terms[i]
				break
			}
		}
		if live {
			if next == nil || next.Start.After(t.Add(in.Slack)) {
				r.add("lost-tick", "job %s tick %s: a term was live and nothing ran it", job, t.Format(time.RFC3339Nano))
			}
			continue
		}
		if next == nil {
			continue // the window ended with nobody leading
		}
		late := next.Start.Sub(t)
		if late > p.Grace+in.Slack || p.Misfire == "skip" {
			continue // beyond grace, or skipped by policy
		}
		covered := false
		for _, c := range catchUps {
			if c.Token == next.Token && !c.Tick.Before(t) {
				covered = p.Misfire != "run-all" || c.Tick.Equal(t)
				if covered {
					break
				}
			}
		}
		if !covered && late >= -in.Slack && late <= p.Grace-in.Slack {
			r.add("lost-tick", "job %s tick %s: missed while nobody led, within grace %v of term %d (%s), and no catch-up run covers it (policy %s)",
				job, t.Format(time.RFC3339Nano), p.Grace, next.Token, next.Instance, p.Misfire)
		}
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "open"
	}
	return t.Format(time.RFC3339Nano)
}

// ParseRunLog reads the lines jobs append: "S <job> <tick RFC3339> <token>
// <instance> <start unix ns> <catch-up 0|1>" at the start of a run, and
// "E ..." lines at the end (ignored here).
func ParseRunLog(rd io.Reader) ([]Start, error) {
	var out []Start
	sc := bufio.NewScanner(rd)
	n := 0
	for sc.Scan() {
		n++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "S" {
			continue
		}
		if len(f) != 7 {
			return nil, fmt.Errorf("run log line %d: %d fields, want 7: %q", n, len(f), sc.Text())
		}
		tick, err := time.Parse(time.RFC3339Nano, f[2])
		if err != nil {
			return nil, fmt.Errorf("run log line %d: tick: %w", n, err)
		}
		tok, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("run log line %d: token: %w", n, err)
		}
		ns, err := strconv.ParseInt(f[5], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("run log line %d: start: %w", n, err)
		}
		out = append(out, Start{Job: f[1], Tick: tick, Token: tok, Instance: f[4], At: time.Unix(0, ns), CatchUp: f[6] == "1", Line: n})
	}
	return out, sc.Err()
}
