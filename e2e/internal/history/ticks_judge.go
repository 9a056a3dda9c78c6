package history

import "time"

// tickJudge holds what checkTicks knows of one fixed-period job while it
// judges the job's ticks one at a time.
type tickJudge struct {
	r     *Report
	in    Input
	terms []Term
	job   string
	p     Policy
	first map[tickID]Start // the first start of each tick run

	logged        map[int64][]Misfire // the job's misfires by tick
	catchUpFailed []Misfire           // zero Tick: the term's catch-up was skipped
	catchUps      []Start             // the job's catch-up runs
	until         map[uint64]time.Time
	ended         map[runID]bool // the runs whose end line is in Input.Ends
	cur           TickVerdict    // the tick being judged: its job, tick and term so far
}

// newTickJudge indexes in's misfires and catch-up runs of job.
func newTickJudge(r *Report, in Input, terms []Term, job string, p Policy, first map[tickID]Start) *tickJudge {
	j := &tickJudge{r: r, in: in, terms: terms, job: job, p: p, first: first, logged: map[int64][]Misfire{}}
	for _, m := range in.Misfires {
		if m.Job != job && (m.Job != "" || !m.Tick.IsZero()) {
			continue
		}
		if m.Tick.IsZero() {
			j.catchUpFailed = append(j.catchUpFailed, m)
			continue
		}
		j.logged[m.Tick.UnixNano()] = append(j.logged[m.Tick.UnixNano()], m)
	}
	for _, s := range in.Starts {
		if s.Job == job && s.CatchUp {
			j.catchUps = append(j.catchUps, s)
		}
	}
	j.until = bounds(terms)
	j.ended = map[runID]bool{}
	for _, e := range in.Ends {
		if e.Job == job {
			j.ended[runID{e.Job, e.Tick.UnixNano(), e.Token}] = true
		}
	}
	return j
}

// ran reports whether a run of t started.
func (j *tickJudge) ran(t time.Time) bool {
	_, ok := j.first[tickID{job: j.job, tick: t.UnixNano()}]
	return ok
}

// loggedBy returns the reason inst logged for not starting t, or, if
// inst is empty, the reason any instance logged; a reason the records
// contradict (backed) is no reason, and a refusal as stale passes the
// tick to the term that fenced it (refusedStale).
func (j *tickJudge) loggedBy(inst string, t time.Time) (string, bool) {
	for _, m := range j.logged[t.UnixNano()] {
		if (inst == "" || m.Instance == inst) && m.Reason != StaleRefused && backed(j.in, j.terms, j.p, m) {
			return m.Reason, true
		}
	}
	return "", false
}

// covers reports whether catch-up run c stands for t: t is among the
// ticks from the first it says it stands for (its own tick if it does
// not say) through its own (run-all: its own tick only).
func (j *tickJudge) covers(c Start, t time.Time) bool {
	from := c.CatchUpFrom
	if from.IsZero() || j.p.Misfire == "run-all" {
		from = c.Tick
	}
	return !t.Before(from) && !t.After(c.Tick)
}

// refusedStale reports whether tm's claim of t was refused because a
// later term had fenced the ledger.
func (j *tickJudge) refusedStale(tm *Term, t time.Time) bool {
	for _, m := range j.logged[t.UnixNano()] {
		if m.Instance == tm.Instance && m.Token == tm.Token && m.Reason == StaleRefused {
			return true
		}
	}
	return false
}

// readClaimed reports whether next logged that it read the job's last
// claim at or after t (a line saying none was missed carries it too):
// a claim is never read from a line's absence.
func (j *tickJudge) readClaimed(next *Term, t time.Time) bool {
	for _, c := range j.in.LastClaims {
		if c.Token == next.Token && c.Instance == next.Instance && c.Job == j.job && !c.Tick.Before(t) {
			return true
		}
	}
	return false
}

// frozen reports whether tm's instance was frozen at t (frozenAt).
func (j *tickJudge) frozen(tm *Term, t time.Time) bool { return frozenAt(j.in, j.terms, tm, t) }

// account counts a tick accounted for, by reason, and lists its verdict.
func (j *tickJudge) account(reason string) {
	if j.r.Accounted == nil {
		j.r.Accounted = map[string]int{}
	}
	j.r.Accounted[reason]++
	v := j.cur
	v.Verdict, v.Reason = VerdictAccounted, reason
	j.r.Ticks = append(j.r.Ticks, v)
}

// lost reports the tick being judged as a lost-tick finding, and lists
// its verdict with the finding's detail as its reason.
func (j *tickJudge) lost(format string, args ...any) {
	j.r.add("lost-tick", format, args...)
	v := j.cur
	v.Verdict, v.Reason = VerdictLost, j.r.Violations[len(j.r.Violations)-1].Detail
	j.r.Ticks = append(j.r.Ticks, v)
}

// ranVerdict lists tick t as run, by the term of its first start.
func (j *tickJudge) ranVerdict(t time.Time) {
	s := j.first[tickID{job: j.job, tick: t.UnixNano()}]
	v := j.cur
	v.Verdict, v.Token, v.Instance = VerdictRan, s.Token, s.Instance
	v.Ended = j.ended[runID{j.job, t.UnixNano(), s.Token}]
	j.r.Ticks = append(j.r.Ticks, v)
}

// termOf names tm (if any) as the term of the tick being judged.
func (j *tickJudge) termOf(tm *Term) {
	if tm != nil {
		j.cur.Token, j.cur.Instance = tm.Token, tm.Instance
	}
}

// accountsFor reports whether term next, the first to start after t,
// accounts for t, and how; "" if it does not.
func (j *tickJudge) accountsFor(next *Term, t time.Time) string {
	in, p, job := j.in, j.p, j.job
	late := next.Start.Sub(t)
	switch {
	case p.Misfire == "skip":
		return "skip policy"
	case late > p.Grace-in.Slack:
		return "beyond grace"
	}
	for _, c := range j.catchUps {
		if c.Token == next.Token && j.covers(c, t) {
			return "catch-up"
		}
	}
	for _, m := range j.catchUpFailed {
		if m.Token == next.Token && m.Instance == next.Instance {
			return "logged: " + m.Reason
		}
	}
	if neverClaimed(in, job, next, t) {
		return "no claim of the job before it (its catch-up had nothing to count from)"
	}
	for _, m := range in.Misfires {
		// A catch-up tick of the next term whose claim failed: one at
		// or before the term began, as loopRan judges; a tick after
		// it, even within the slack, is its schedule loop's and
		// stands for no missed tick. (In the suite's kept soaks no
		// catch-up run's tick came after its term's start: some
		// 15,600 runs.)
		if m.Job == job && m.Instance == next.Instance && m.Token == next.Token && !m.Tick.IsZero() && !m.Tick.Before(t) &&
			!m.Tick.After(next.Start) && (p.Misfire != "run-all" || m.Tick.Equal(t)) &&
			!m.At.Before(next.Start.Add(-in.Slack)) && m.Reason != StaleRefused && backed(in, j.terms, p, m) {
			return "logged: " + m.Reason + " (catch-up)"
		}
	}
	return ""
}

// claimedByKilled reports whether the term before t was killed within
// the slack around t and next read the job's last claim at or after t
// (or found none of its ticks missed): the killed term claimed t and
// died before the run started.
func (j *tickJudge) claimedByKilled(next *Term, t time.Time) bool {
	var prev *Term
	for i, tm := range j.terms {
		if tm.Token != next.Token && !tm.Start.After(t) && (prev == nil || tm.Start.After(prev.Start)) {
			prev = &j.terms[i]
		}
	}
	if prev == nil || !prev.Killed || prev.Stop.Before(t.Add(-j.in.Slack)) || prev.Stop.After(t.Add(j.in.Slack)) {
		return false
	}
	return j.readClaimed(next, t)
}

// active reports whether tm decided any tick of any job, its catch-up
// included.
func (j *tickJudge) active(tm *Term) bool {
	for _, s := range j.in.Starts {
		if s.Token == tm.Token && s.Instance == tm.Instance {
			return true
		}
	}
	for _, m := range j.in.Misfires {
		if m.Token == tm.Token && m.Instance == tm.Instance {
			return true
		}
	}
	return false
}
