package history

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

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

// tickID names a tick of a job; a run now's also its request (ticks of
// runs now are their request's time, and records give it to the second).
type tickID struct {
	job     string
	tick    int64
	request string
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
		id := tickID{s.Job, s.Tick.UnixNano(), s.Request}
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

	// 3b. No run starts before its nominal tick: the schedule loop fires
	// a tick once the wall clock has reached it, and the job's first line
	// comes after that. A run-now run's tick is its request's time.
	for _, s := range in.Starts {
		if s.At.Before(s.Tick) {
			r.add("early-start", "line %d: %s started job %s tick %s (token %d) at %s, %v before its tick",
				s.Line, s.Instance, s.Job, s.Tick.Format(time.RFC3339Nano), s.Token, s.At.Format(time.RFC3339Nano), s.Tick.Sub(s.At))
		}
	}

	// 3c. A catch-up run stands for missed ticks only: the first tick it
	// says it stands for (its own record) is not after its tick, and
	// comes after the last claimed tick its term read for the job (the
	// node's log).
	for _, s := range in.Starts {
		if !s.CatchUp || s.CatchUpFrom.IsZero() {
			continue
		}
		if s.CatchUpFrom.After(s.Tick) {
			r.add("catch-up-cover", "line %d: %s's catch-up run of job %s tick %s (token %d) says it stands for the ticks from %s, after its own",
				s.Line, s.Instance, s.Job, s.Tick.Format(time.RFC3339), s.Token, s.CatchUpFrom.Format(time.RFC3339))
			continue
		}
		for _, c := range in.LastClaims {
			if c.Token == s.Token && c.Instance == s.Instance && c.Job == s.Job && !s.CatchUpFrom.After(c.Tick) {
				r.add("catch-up-cover", "line %d: %s's catch-up run of job %s tick %s (token %d) says it stands for the ticks from %s, yet its term read %s as the job's last claimed tick",
					s.Line, s.Instance, s.Job, s.Tick.Format(time.RFC3339), s.Token, s.CatchUpFrom.Format(time.RFC3339), c.Tick.Format(time.RFC3339))
			}
		}
	}

	// 4. No two terms overlap in job starts: ordered by token, every start
	// of a term comes before each later term began (checkStartOrder).
	checkStartOrder(&r, in.Starts, terms)

	// 5. Handover and failover times.
	excused := func(from, to time.Time) bool {
		for _, w := range in.Excused {
			if !from.After(w.To) && !to.Before(w.From) {
				return true
			}
		}
		return false
	}
	for i := 1; i < len(terms); i++ {
		prev, next := terms[i-1], terms[i]
		graceful := prev.Graceful && !prev.End.IsZero()
		from := prev.Stop
		if graceful {
			from = prev.End
		}
		switch {
		case from.IsZero():
		case excused(from, next.Start):
			r.Excused++
		case graceful:
			d := next.Start.Sub(prev.End)
			r.MaxHandover = max(r.MaxHandover, d)
			if in.HandoverBound > 0 && d > in.HandoverBound {
				r.add("slow-handover", "%s released term %d at %s; %s led only %v later (bound %v)",
					prev.Instance, prev.Token, prev.End.Format(time.RFC3339Nano), next.Instance, d, in.HandoverBound)
			}
		default:
			r.MaxFailover = max(r.MaxFailover, next.Start.Sub(prev.Stop))
			if prev.Killed && !killedAfter(in.Faults, prev, next.Start) {
				d := next.Start.Sub(prev.Stop)
				r.MaxCrashFailover = max(r.MaxCrashFailover, d)
				if in.CrashBound > 0 && d > in.CrashBound {
					r.add("slow-failover", "%s was killed in term %d at %s; %s led only %v later (bound %v)",
						prev.Instance, prev.Token, prev.Stop.Format(time.RFC3339Nano), next.Instance, d, in.CrashBound)
				}
			}
		}
	}

	// 5b. A graceful term drains: every run it started has ended by its
	// release. The job writes its end line before it exits, and the node
	// releases after it has seen the exit: no slack.
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
			case e.At.After(t.End):
				r.add("drain", "line %d: %s's run of job %s tick %s (token %d) ended at %s (line %d), after the graceful release at %s",
					s.Line, s.Instance, s.Job, s.Tick.Format(time.RFC3339), s.Token, e.At.Format(time.RFC3339Nano), e.Line, t.End.Format(time.RFC3339Nano))
			}
		}
	}

	// 4b. No two terms' runs execute at the same time, by the jobs' own
	// records; 4c. no run starts after an acknowledged pause.
	checkTermOverlap(&r, runLines(in))
	checkPauses(&r, in.Starts, in.Pauses, in.Slack, in.Faults, append(slices.Clip(in.Frozen), in.ClockSteps...))

	// 6. Every tick in the window is run or accounted for by the policy.
	for job, p := range in.Jobs {
		if p.Every <= 0 {
			continue
		}
		checkTicks(&r, in, terms, job, p, first)
	}
	return r
}

// killedAfter reports whether the suite killed term t's node (a
// kill-leader or kill-follower fault aimed at it, by the suite's clock)
// only at or after at, the next term's start. The term had ended
// otherwise before (its lease lost to a backend fault, say), so its
// failover was not a crash's, and the kill cannot have delayed the next
// term. Without such a fault the term counts as crashed.
func killedAfter(faults []Fault, t Term, at time.Time) bool {
	for _, f := range faults {
		if f.Target == t.Instance && (f.Kind == "kill-leader" || f.Kind == "kill-follower") && !f.At.Before(t.Start) {
			return !f.At.Before(at)
		}
	}
	return false
}

// checkStartOrder enforces single starter by the order of the lines:
// ordered by token, no term starts a run once a later term has begun, by
// its "acquired leadership" line or by its first start, whichever came
// first, whether or not that term ever ran anything. No slack: the later
// term took the lease only once the backend could give it away, and by
// then the earlier term started nothing (its deadline passed, the
// process groups of its runs killed); the earlier term's line comes after
// its decision, and the later term's after its acquisition.
func checkStartOrder(r *Report, starts []Start, terms []Term) {
	spans := map[uint64]*tokenSpan[Start]{}
	var tokens []uint64
	for _, sp := range spansByToken(starts, func(s Start) (uint64, time.Time) { return s.Token, s.At }) {
		spans[sp.token] = sp
		tokens = append(tokens, sp.token)
	}
	began := map[uint64]Term{} // terms is in start order: a token's first term
	for _, t := range terms {
		if _, dup := began[t.Token]; !dup {
			began[t.Token] = t
			tokens = append(tokens, t.Token)
		}
	}
	slices.Sort(tokens)
	tokens = slices.Compact(tokens)
	var latest *tokenSpan[Start] // the earlier term whose starts reach furthest
	for _, k := range tokens {
		sp := spans[k]
		var from time.Time
		var who, how string
		if sp != nil {
			from, who = sp.first.At, sp.first.Instance
			how = fmt.Sprintf("started a run at %s (line %d)", sp.first.At.Format(time.RFC3339Nano), sp.first.Line)
		}
		if t, ok := began[k]; ok && (sp == nil || t.Start.Before(from)) {
			from, who = t.Start, t.Instance
			how = "began at " + t.Start.Format(time.RFC3339Nano)
		}
		if latest != nil && !from.After(latest.last.At) {
			a := latest.last
			r.add("overlap", "term %d (%s) %s, before term %d (%s) started its last run at %s (line %d)",
				k, who, how, latest.token, a.Instance, a.At.Format(time.RFC3339Nano), a.Line)
		}
		if sp != nil && (latest == nil || sp.last.At.After(latest.last.At)) {
			latest = sp
		}
	}
}
