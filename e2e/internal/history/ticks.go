package history

import (
	"fmt"
	"strings"
	"time"
)

// checkTicks accounts for every tick of a fixed-period job in the window.
// A tick not run is accounted for when:
//   - the instance of the term live at the tick (any instance, if none was
//     live) logged why it did not start it (Input.Misfires), and the
//     records back the reason (excuses.go: a run still going, another
//     claimant); a refusal as stale passes the tick to the next term;
//   - the live term's own catch-up ran a run standing for it (the tick
//     came between the term's start and its schedule loop's);
//   - a term was live at the tick (or began within the slack before it),
//     its instance was frozen then (SIGSTOP, or a pause of the whole
//     machine) and the term did not outlive the freeze, and the next
//     term accounts for it as below, or the suite killed it within the
//     slack after it woke and the next term read a last claim at or
//     after the tick (its loop claimed the late tick on waking);
//   - the live term survived a pause of the machine that skipped over
//     the tick, and the policy let it go (steppedOver);
//   - no term was live: the next term started beyond the grace, or the
//     policy is skip, or one of its catch-up runs says it stands for the
//     tick (from Start.CatchUpFrom through its own tick; run-all: its own
//     tick only), or it logged that its catch-up failed, or that a
//     catch-up tick's claim failed (a tick at or before its start; a
//     later one is its loop's), or the term before was killed within
//     the slack around the tick (its claim may have landed and the run
//     not started: at most once) and the next term logged that it read
//     a last claim at or after the tick. A claim is never read from a
//     line's absence.
//
// A live, unfrozen term that neither ran a tick nor logged why is a lost
// tick, whatever later terms did, but for these cases, in which the next
// term must account for it as above: its claim was refused as stale; the
// term ended before its schedule loop began, within two claim timeouts
// of its start (its catch-up's read and claims); its instance was killed
// within the claim timeout after the tick with the tick's claim in
// flight (it asked again, or skipped later ticks while it was pending);
// or it was killed before the job's next tick and within the claim
// timeout (the claim may have been on a slow link). In these cases, but
// for the loop's, the claim may have landed (a refusal as stale can
// answer the retry of a claim whose first attempt landed): then it is
// enough that the next term read a last claim at or after the tick.
func checkTicks(r *Report, in Input, terms []Term, job string, p Policy, first map[tickID]Start) {
	j := newTickJudge(r, in, terms, job, p, first)
	for t := firstTick(p, in.From); !t.After(in.To); t = t.Add(p.Every) {
		j.cur = TickVerdict{Job: job, Tick: t}
		j.judge(t)
	}
}

// judge accounts for tick t of the job, or reports it lost: run; a
// reason logged; the live term's own catch-up; a pause stepped over; the
// live, unfrozen term's excuses (liveLost); the next term (byNext).
func (j *tickJudge) judge(t time.Time) {
	in, p, job := j.in, j.p, j.job
	if j.ran(t) {
		j.ranVerdict(t)
		return
	}
	live := j.liveAt(t)
	j.termOf(live)
	// A logged reason counts if the live term's instance logged it, or
	// any instance when no term was live (the old leader's last ticks).
	inst := ""
	if live != nil {
		inst = live.Instance
	}
	if why, ok := j.loggedBy(inst, t); ok {
		j.account("logged: " + why)
		return
	}
	// A live term's own catch-up stands for the ticks before its
	// schedule loop began (run-once: the last of them runs).
	if live != nil && p.Misfire != "skip" {
		own := false
		for _, c := range j.catchUps {
			if c.Token == live.Token && j.covers(c, t) {
				own = true
				break
			}
		}
		if own {
			j.account("catch-up")
			return
		}
	}
	if live != nil {
		if how := steppedOver(in, live, p, t); how != "" {
			j.account(how)
			return
		}
	}
	how, next := j.byNext(t)
	if live == nil {
		j.termOf(next)
	}
	switch {
	case live != nil && !j.frozen(live, t):
		j.liveLost(live, t, how, next)
	case next == nil:
		// The window ended with nobody leading after t.
		j.account("no later term")
	case how != "":
		if live != nil && !strings.HasPrefix(how, "frozen, then ") {
			how = "frozen, then " + how
		}
		j.account(how)
	case refusedBefore(j.logged[t.UnixNano()], j.terms, next) && j.readClaimed(next, t):
		// The term just before next (frozen at t, or stopping
		// within the slack after it) refused its claim of t as
		// stale, as it logged for t itself, and next read t as
		// claimed: the claim had landed (sent before the freeze or
		// the cut), and at most once means nobody runs it.
		j.account("claim refused as stale by the term before (the claim landed)")
	case live != nil && killedOnWaking(in, live, t) && j.readClaimed(next, t):
		// Its instance was frozen at t and killed within the slack
		// after waking: its loop fired t late on waking and claimed
		// it (next read the claim), and the kill landed before the
		// run started. At most once: nobody runs it. Killed later,
		// the term outlived its freeze and the live term's rules
		// above judge t.
		j.account("frozen, then killed as it woke (the claim landed)")
	default:
		lead := "nobody led"
		if live != nil {
			lead = fmt.Sprintf("%s (term %d) was frozen", live.Instance, live.Token)
		}
		j.lost("job %s tick %s: missed while %s, within grace %v of term %d (%s, started %s), and no catch-up run covers it (policy %s)%s",
			job, t.Format(time.RFC3339Nano), lead, p.Grace, next.Token, next.Instance, next.Start.Format(time.RFC3339Nano), p.Misfire, unwritten(in, job, t, p.Grace))
	}
}

// liveAt returns the term live at t, nil if none: one that started
// before t (within the slack) and had neither stopped nor been
// superseded by then.
func (j *tickJudge) liveAt(t time.Time) *Term {
	for i, tm := range j.terms {
		u := j.until[tm.Token]
		if !tm.Stop.IsZero() && (u.IsZero() || tm.Stop.Before(u)) {
			u = tm.Stop // stepping down or lost: no new ticks fire
		}
		if !tm.Start.After(t.Add(-j.in.Slack)) && (u.IsZero() || u.After(t.Add(j.in.Slack))) {
			return &j.terms[i]
		}
	}
	return nil
}

// liveLost judges tick t, which live (unfrozen at t) neither ran nor
// logged why: lost, but for live's excuses, in which the next term must
// account for t (how, from byNext; next nil if there is none).
func (j *tickJudge) liveLost(live *Term, t time.Time, how string, next *Term) {
	in, p, job := j.in, j.p, j.job
	excuse := ""
	switch {
	case j.refusedStale(live, t):
		// A later term had fenced the ledger: it accounts for t.
		excuse = "claim refused as stale"
	case live.Killed && inFlight(in, j.terms, p, job, live, t):
		excuse = "claim in flight when its instance was killed"
	case live.Killed && live.Stop.Before(t.Add(min(p.Every, in.ClaimTimeout))):
		// Killed before the job's next tick, within the claim
		// timeout: its claim of t may have been on the wire (a
		// slow link: one attempt, no retry logged, no later tick
		// to skip).
		excuse = "killed before the job's next tick, its claim possibly in flight"
	case !live.Stop.IsZero() && !loopRan(in, live) && !t.After(live.Start.Add(2*in.ClaimTimeout+in.Slack)):
		// The catch-up holds the loop back by at most its read of
		// the last claims and its claims, each within the claim
		// timeout.
		excuse = "term over before its schedule loop began"
	}
	if excuse != "" {
		switch {
		case next == nil:
			j.account(excuse + ", no later term")
			return
		case how != "":
			j.account(excuse + ", then " + how)
			return
		case (live.Killed || j.refusedStale(live, t)) && j.readClaimed(next, t):
			j.account(excuse + " (the claim landed)")
			return
		}
	}
	j.lost("job %s tick %s: term %d (%s) was live and neither ran it nor logged why%s",
		job, t.Format(time.RFC3339Nano), live.Token, live.Instance, unwritten(in, job, t, p.Grace))
}

// byNext reports whether the first term starting after t accounts for
// t, and how; "" if it does not (or there is no such term: next nil).
// A term that began within the slack around t may have been live at
// t: if it does not account for t and its instance was frozen at t
// ("frozen, then ...") or killed within the slack after t, the term
// after it does; so does the term after one that ended before it
// decided any tick, or was killed in its catch-up. A term that began
// later than that and did not account for t lost it.
func (j *tickJudge) byNext(t time.Time) (how string, next *Term) {
	in, p, job, terms := j.in, j.p, j.job, j.terms
	prefix := ""
	killedInCatchUp := false
	unknownInCatchUp := false // a claim of its catch-up asked again, never confirmed
	refused := false          // a term before refused its claim of t as stale
	inFlightKilled := false   // a term before was killed with its claim of t in flight
	for i, tm := range terms {
		// A term that began within the slack before t but stopped
		// before t (killed at once) is not the one after t.
		if !tm.Start.After(t.Add(-in.Slack)) || (!tm.Stop.IsZero() && tm.Stop.Before(t)) {
			continue
		}
		if next == nil {
			next = &terms[i]
		}
		if how := j.accountsFor(&terms[i], t); how != "" {
			return prefix + how, next
		}
		if j.claimedByKilled(&terms[i], t) || ((killedInCatchUp || inFlightKilled) && j.readClaimed(&terms[i], t)) {
			return prefix + "claimed by a term killed at the tick", next
		}
		if unknownInCatchUp && j.readClaimed(&terms[i], t) {
			return prefix + "claim of unknown outcome landed", next
		}
		if refused && j.readClaimed(&terms[i], t) {
			return prefix + "its claim landed", next
		}
		switch {
		case tm.Killed && (!loopRan(in, &terms[i]) || (!loopRanJob(in, &terms[i], job) && !ranJob(in, &terms[i], job) && inCatchUp(in, &terms[i]))):
			// Killed in its catch-up (of this job, while its loop
			// ran others'), whose claim of t, or of the tick its
			// catch-up run stood for t with, may have landed before
			// the run started: the term after it accounts for t, or
			// read a last claim at or after t.
			killedInCatchUp = true
		case !tm.Stop.IsZero() && !j.active(&terms[i]):
			// It ended before it decided any tick (its lease lapsed
			// as it began): the term after it accounts for t.
		case j.frozen(&terms[i], t):
			prefix = "frozen, then "
		case tm.Killed && !tm.Stop.After(t.Add(in.Slack)):
			// Killed within the slack after t: it may have claimed t
			// and died before the run started; the term after it
			// accounts for t (claimedByKilled looks at this one).
		case !t.Before(tm.Start) && !loopRan(in, &terms[i]) && notFired(in, &terms[i], job, t):
			// t came after its catch-up's last tick (its start), and
			// it ended before its schedule loop began, as it logged
			// and its records show: the term after it accounts for t.
			prefix = "term over before its schedule loop began, then "
		case !tm.Killed && inCatchUp(in, &terms[i]) && !loopRanJob(in, &terms[i], job) && !ranJob(in, &terms[i], job) && catchUpRefused(in, &terms[i], job, t):
			// Its catch-up's claim, standing for t, was refused as
			// stale (its lease lapsed as it asked), and it ran
			// nothing of the job: the term after it accounts for t.
			prefix = "catch-up claim refused as stale, then "
			unknownInCatchUp = askedAgain(in, &terms[i], job, t)
		case tm.Killed && !tm.Start.After(t) && inFlight(in, terms, p, job, &terms[i], t):
			// It began within the slack before t, its loop took t,
			// and it was killed with t's claim in flight (asked
			// again, or a later tick skipped for it): the term after
			// it accounts for t, or read a last claim at or after it.
			prefix = "claim in flight when its instance was killed, then "
			inFlightKilled = true
		case !tm.Start.After(t) && !tm.Stop.IsZero() && j.refusedStale(&terms[i], t):
			// It began within the slack before t and its claim of t
			// was refused as stale, as it logged for t itself: the
			// term after it accounts for t, or read a last claim at
			// or after it (the claim had landed before the refusal).
			prefix = "claim refused as stale, then "
			refused = true
		default:
			return "", next
		}
	}
	return "", nil // every term after t was skipped: nobody after it
}
