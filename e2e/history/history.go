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
	Lost     time.Time // when the node logged the loss of its lease; zero if it did not
	End      time.Time // lease released or lost; zero if still open or unknown (killed)
	Graceful bool      // ended by a release after a step-down
	// SteppedDown: the node stepped down (SIGTERM, step-down request); its
	// lease was held until the release or a loss, even if the term did not
	// end gracefully (a failed release).
	SteppedDown bool
	Killed      bool // the node was killed during the term
}

// Fault is one injected fault, for the report.
type Fault struct {
	At     time.Time
	Kind   string
	Target string
	Detail string // e.g. the duration of a partition
}

// End is one run as the job recorded it when it ended ("E" lines).
type End struct {
	Job      string
	Tick     time.Time
	Token    uint64
	Instance string
	At       time.Time
	Line     int
}

// Misfire is a tick an instance logged as not started, with the reason it
// logged: an overlap skip, a failed or refused claim, a term that ended
// between the claim and the start. A tick in Misfires is accounted for.
// A zero Tick with a Token stands for a catch-up the term with that token
// logged as skipped (it could not read the last claimed tick): every tick
// that term's catch-up would have covered is accounted for.
type Misfire struct {
	Instance string
	Token    uint64 // the term's token, if known
	Job      string
	Tick     time.Time
	At       time.Time
	Reason   string
}

// Interval is a span of time in which an instance was frozen (SIGSTOP).
type Interval struct {
	Instance string
	From, To time.Time
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
	// Ends are the "E" lines: a graceful term's runs must all have ended
	// by its release (the drain). Nil skips that check.
	Ends []End
	// Misfires are ticks the instances logged as not started, and why.
	Misfires []Misfire
	// Frozen are the spans in which an instance was stopped (SIGSTOP): a
	// live term whose instance was frozen at a tick may miss it silently;
	// the next term's catch-up must then account for it.
	Frozen []Interval
	// HandoverBound is the longest allowed time from a graceful release to
	// the next term's start.
	HandoverBound time.Duration
	// Slack absorbs the time between a decision and its log line.
	Slack time.Duration
}

// Violation is one broken guarantee.
type Violation struct {
	Kind   string // duplicate, overlap, token-order, outside-term, lost-tick, slow-handover, drain
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
	Drains        int           // runs of a graceful term still going at its release
	MaxHandover   time.Duration // graceful: release to the next term
	MaxFailover   time.Duration // non-graceful: last sign of the old term to the next term
	// MaxCrashFailover is the longest time from the kill of a leader to the
	// next term's start.
	MaxCrashFailover time.Duration
	// Accounted counts the ticks not run that the policies account for,
	// by reason: "logged: <the node's message>", "catch-up" (a later tick
	// of the next term's catch-up run stands for it, run-once), "beyond
	// grace", "skip policy", "frozen" (see Input.Frozen).
	Accounted  map[string]int
	Violations []Violation
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
	case "drain":
		r.Drains++
	}
}

// bounds returns, by token, the instant after which a term may start no
// job: the first of its loss (Lost, or Stop for a term that ended without
// a step-down and has no Lost), its end (release or loss), the
// kill of its process, and the start of the next term, the latest instant
// at which the backend can have ended it. A step-down alone does not bound
// it: the lease is held and renewed until the release, and a run fired
// just before the step-down may start until then. Zero: open.
func bounds(terms []Term) map[uint64]time.Time {
	out := map[uint64]time.Time{}
	for i, t := range terms {
		var u time.Time
		earlier := func(c time.Time) {
			if !c.IsZero() && (u.IsZero() || c.Before(u)) {
				u = c
			}
		}
		switch {
		case t.Killed:
			earlier(t.Stop)
		case !t.Lost.IsZero():
			earlier(t.Lost)
		case !t.Graceful && !t.SteppedDown:
			earlier(t.Stop)
		}
		earlier(t.End)
		for _, n := range terms[i+1:] {
			if n.Start.After(t.Start) {
				earlier(n.Start)
				break
			}
		}
		out[t.Token] = u
	}
	return out
}

type tickID struct {
	job  string
	tick int64
}

type runID struct {
	job   string
	tick  int64
	token uint64
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
	until := bounds(terms)
	for _, s := range in.Starts {
		t, ok := byToken[s.Token]
		u := until[s.Token]
		switch {
		case !ok:
			r.add("outside-term", "line %d: %s started job %s tick %s with token %d, which no node logged as a term",
				s.Line, s.Instance, s.Job, s.Tick.Format(time.RFC3339Nano), s.Token)
		case t.Instance != s.Instance:
			r.add("outside-term", "line %d: %s started job %s with token %d, which is %s's term", s.Line, s.Instance, s.Job, s.Token, t.Instance)
		case s.At.Before(t.Start.Add(-in.Slack)) || (!u.IsZero() && s.At.After(u.Add(in.Slack))):
			r.add("outside-term", "line %d: %s started job %s tick %s at %s, outside its term %d [%s, %s] (stop %s, end %s, slack %v)",
				s.Line, s.Instance, s.Job, s.Tick.Format(time.RFC3339), s.At.Format(time.RFC3339Nano), s.Token,
				t.Start.Format(time.RFC3339Nano), stamp(u), stamp(t.Stop), stamp(t.End), in.Slack)
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
			if prev.Killed {
				r.MaxCrashFailover = max(r.MaxCrashFailover, next.Start.Sub(prev.Stop))
			}
		}
	}

	// 5b. A graceful term drains: every run it started has ended by its
	// release.
	if in.Ends != nil {
		ended := map[runID]End{}
		for _, e := range in.Ends {
			ended[runID{e.Job, e.Tick.UnixNano(), e.Token}] = e
		}
		for _, s := range in.Starts {
			t, ok := byToken[s.Token]
			if !ok || !t.Graceful || t.Killed || t.End.IsZero() {
				continue
			}
			e, ok := ended[runID{s.Job, s.Tick.UnixNano(), s.Token}]
			switch {
			case !ok:
				r.add("drain", "line %d: %s's run of job %s tick %s (token %d) never ended, yet the term was released gracefully at %s",
					s.Line, s.Instance, s.Job, s.Tick.Format(time.RFC3339), s.Token, t.End.Format(time.RFC3339Nano))
			case e.At.After(t.End.Add(in.Slack)):
				r.add("drain", "line %d: %s's run of job %s tick %s (token %d) ended at %s (line %d), after the graceful release at %s",
					s.Line, s.Instance, s.Job, s.Tick.Format(time.RFC3339), s.Token, e.At.Format(time.RFC3339Nano), e.Line, t.End.Format(time.RFC3339Nano))
			}
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
// A tick not run is accounted for when:
//   - the instance of the term live at the tick (any instance, if none was
//     live) logged why it did not start it (Input.Misfires);
//   - the live term's own catch-up ran a tick at or after it (the tick
//     came between the term's start and its schedule loop's);
//   - a term was live at the tick, its instance was frozen then, and the
//     next term accounts for it as below;
//   - no term was live: the next term started beyond the grace, or the
//     policy is skip, or its catch-up ran a tick at or after this one
//     (run-once; run-all needs this very tick), or it logged that its
//     catch-up failed, or that a catch-up tick's claim failed.
//
// A live, unfrozen term that neither ran a tick nor logged why is a lost
// tick, whatever later terms did.
func checkTicks(r *Report, in Input, terms []Term, job string, p Policy, first map[tickID]Start) {
	ran := func(t time.Time) bool {
		_, ok := first[tickID{job, t.UnixNano()}]
		return ok
	}
	logged := map[int64][]Misfire{}
	var catchUpFailed []Misfire // zero Tick: the term's catch-up was skipped
	for _, m := range in.Misfires {
		if m.Job != job {
			continue
		}
		if m.Tick.IsZero() {
			catchUpFailed = append(catchUpFailed, m)
			continue
		}
		logged[m.Tick.UnixNano()] = append(logged[m.Tick.UnixNano()], m)
	}
	// loggedBy returns the reason inst logged for not starting t, or, if
	// inst is empty, the reason any instance logged.
	loggedBy := func(inst string, t time.Time) (string, bool) {
		for _, m := range logged[t.UnixNano()] {
			if inst == "" || m.Instance == inst {
				return m.Reason, true
			}
		}
		return "", false
	}
	var catchUps []Start
	for _, s := range in.Starts {
		if s.Job == job && s.CatchUp {
			catchUps = append(catchUps, s)
		}
	}
	until := bounds(terms)
	frozen := func(inst string, t time.Time) bool {
		for _, f := range in.Frozen {
			if f.Instance == inst && !t.Before(f.From.Add(-in.Slack)) && !t.After(f.To.Add(in.Slack)) {
				return true
			}
		}
		return false
	}
	account := func(reason string) {
		if r.Accounted == nil {
			r.Accounted = map[string]int{}
		}
		r.Accounted[reason]++
	}
	// byNext reports whether the first term starting after t accounts for
	// t, and how; "" if it does not (or there is no such term: ok false).
	byNext := func(t time.Time) (how string, next *Term) {
		for i := range terms {
			if terms[i].Start.After(t.Add(-in.Slack)) {
				next = &terms[i]
				break
			}
		}
		if next == nil {
			return "", nil
		}
		late := next.Start.Sub(t)
		switch {
		case p.Misfire == "skip":
			return "skip policy", next
		case late > p.Grace-in.Slack:
			return "beyond grace", next
		}
		for _, c := range catchUps {
			if c.Token == next.Token && !c.Tick.Before(t) && (p.Misfire != "run-all" || c.Tick.Equal(t)) {
				return "catch-up", next
			}
		}
		for _, m := range catchUpFailed {
			if m.Token == next.Token && m.Instance == next.Instance {
				return "logged: " + m.Reason, next
			}
		}
		for _, m := range in.Misfires {
			// A catch-up tick of the next term whose claim failed.
			if m.Job == job && m.Instance == next.Instance && !m.Tick.IsZero() && !m.Tick.Before(t) &&
				!m.Tick.After(next.Start.Add(in.Slack)) && (p.Misfire != "run-all" || m.Tick.Equal(t)) &&
				!m.At.Before(next.Start.Add(-in.Slack)) {
				return "logged: " + m.Reason + " (catch-up)", next
			}
		}
		return "", next
	}
	from := in.From.Truncate(p.Every).Add(p.Every)
	for t := from; !t.After(in.To); t = t.Add(p.Every) {
		if ran(t) {
			continue
		}
		// A term is live at t if it started before t and had neither
		// stopped nor been superseded by then.
		var live *Term
		for i, tm := range terms {
			u := until[tm.Token]
			if !tm.Stop.IsZero() && (u.IsZero() || tm.Stop.Before(u)) {
				u = tm.Stop // stepping down or lost: no new ticks fire
			}
			if !tm.Start.After(t.Add(-in.Slack)) && (u.IsZero() || u.After(t.Add(in.Slack))) {
				live = &terms[i]
				break
			}
		}
		// A logged reason counts if the live term's instance logged it, or
		// any instance when no term was live (the old leader's last ticks).
		inst := ""
		if live != nil {
			inst = live.Instance
		}
		if why, ok := loggedBy(inst, t); ok {
			account("logged: " + why)
			continue
		}
		// A live term's own catch-up stands for the ticks before its
		// schedule loop began (run-once: the last of them runs).
		if live != nil && p.Misfire != "skip" {
			own := false
			for _, c := range catchUps {
				if c.Token == live.Token && !c.Tick.Before(t) && (p.Misfire != "run-all" || c.Tick.Equal(t)) {
					own = true
					break
				}
			}
			if own {
				account("catch-up")
				continue
			}
		}
		how, next := byNext(t)
		switch {
		case live != nil && !frozen(live.Instance, t):
			r.add("lost-tick", "job %s tick %s: term %d (%s) was live and neither ran it nor logged why",
				job, t.Format(time.RFC3339Nano), live.Token, live.Instance)
		case next == nil:
			// The window ended with nobody leading after t.
			account("no later term")
		case how != "":
			if live != nil {
				how = "frozen, then " + how
			}
			account(how)
		default:
			lead := "nobody led"
			if live != nil {
				lead = fmt.Sprintf("%s (term %d) was frozen", live.Instance, live.Token)
			}
			r.add("lost-tick", "job %s tick %s: missed while %s, within grace %v of term %d (%s, started %s), and no catch-up run covers it (policy %s)",
				job, t.Format(time.RFC3339Nano), lead, p.Grace, next.Token, next.Instance, next.Start.Format(time.RFC3339Nano), p.Misfire)
		}
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "open"
	}
	return t.Format(time.RFC3339Nano)
}

// runLine is one parsed line of a run log.
type runLine struct {
	job      string
	tick     time.Time
	token    uint64
	instance string
	at       time.Time
	last     string // catch-up flag ("S") or status ("E")
	line     int
}

// parseRunLines reads the lines of rd that start with kind: "<kind> <job>
// <tick RFC3339> <token> <instance> <unix ns> <last>", each made a T by
// conv.
func parseRunLines[T any](rd io.Reader, kind, atName string, conv func(runLine) T) ([]T, error) {
	out := []T{}
	sc := bufio.NewScanner(rd)
	n := 0
	for sc.Scan() {
		n++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != kind {
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
			return nil, fmt.Errorf("run log line %d: %s: %w", n, atName, err)
		}
		out = append(out, conv(runLine{job: f[1], tick: tick, token: tok, instance: f[4], at: time.Unix(0, ns), last: f[6], line: n}))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ParseRunLog reads the lines jobs append: "S <job> <tick RFC3339> <token>
// <instance> <start unix ns> <catch-up 0|1>" at the start of a run, and
// "E ..." lines at the end (ignored here).
func ParseRunLog(rd io.Reader) ([]Start, error) {
	return parseRunLines(rd, "S", "start", func(l runLine) Start {
		return Start{Job: l.job, Tick: l.tick, Token: l.token, Instance: l.instance, At: l.at, CatchUp: l.last == "1", Line: l.line}
	})
}

// ParseEnds reads the "E <job> <tick RFC3339> <token> <instance> <end unix
// ns> <status>" lines of a run log.
func ParseEnds(rd io.Reader) ([]End, error) {
	return parseRunLines(rd, "E", "end", func(l runLine) End {
		return End{Job: l.job, Tick: l.tick, Token: l.token, Instance: l.instance, At: l.at, Line: l.line}
	})
}
