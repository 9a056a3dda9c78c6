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
	ran := func(t time.Time) bool {
		_, ok := first[tickID{job: job, tick: t.UnixNano()}]
		return ok
	}
	logged := map[int64][]Misfire{}
	var catchUpFailed []Misfire // zero Tick: the term's catch-up was skipped
	for _, m := range in.Misfires {
		if m.Job != job && (m.Job != "" || !m.Tick.IsZero()) {
			continue
		}
		if m.Tick.IsZero() {
			catchUpFailed = append(catchUpFailed, m)
			continue
		}
		logged[m.Tick.UnixNano()] = append(logged[m.Tick.UnixNano()], m)
	}
	// loggedBy returns the reason inst logged for not starting t, or, if
	// inst is empty, the reason any instance logged; a reason the records
	// contradict (backed) is no reason, and a refusal as stale passes the
	// tick to the term that fenced it (refusedStale).
	loggedBy := func(inst string, t time.Time) (string, bool) {
		for _, m := range logged[t.UnixNano()] {
			if (inst == "" || m.Instance == inst) && m.Reason != StaleRefused && backed(in, terms, p, m) {
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
	// covers reports whether catch-up run c stands for t: t is among the
	// ticks from the first it says it stands for (its own tick if it does
	// not say) through its own (run-all: its own tick only).
	covers := func(c Start, t time.Time) bool {
		from := c.CatchUpFrom
		if from.IsZero() || p.Misfire == "run-all" {
			from = c.Tick
		}
		return !t.Before(from) && !t.After(c.Tick)
	}
	// refusedStale reports whether tm's claim of t was refused because a
	// later term had fenced the ledger.
	refusedStale := func(tm *Term, t time.Time) bool {
		for _, m := range logged[t.UnixNano()] {
			if m.Instance == tm.Instance && m.Token == tm.Token && m.Reason == StaleRefused {
				return true
			}
		}
		return false
	}
	// readClaimed reports whether next logged that it read the job's last
	// claim at or after t (a line saying none was missed carries it too):
	// a claim is never read from a line's absence.
	readClaimed := func(next *Term, t time.Time) bool {
		for _, c := range in.LastClaims {
			if c.Token == next.Token && c.Instance == next.Instance && c.Job == job && !c.Tick.Before(t) {
				return true
			}
		}
		return false
	}
	until := bounds(terms)
	frozen := func(tm *Term, t time.Time) bool { return frozenAt(in, terms, tm, t) }
	account := func(reason string) {
		if r.Accounted == nil {
			r.Accounted = map[string]int{}
		}
		r.Accounted[reason]++
	}
	// accountsFor reports whether term next, the first to start after t,
	// accounts for t, and how; "" if it does not.
	accountsFor := func(next *Term, t time.Time) string {
		late := next.Start.Sub(t)
		switch {
		case p.Misfire == "skip":
			return "skip policy"
		case late > p.Grace-in.Slack:
			return "beyond grace"
		}
		for _, c := range catchUps {
			if c.Token == next.Token && covers(c, t) {
				return "catch-up"
			}
		}
		for _, m := range catchUpFailed {
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
				!m.At.Before(next.Start.Add(-in.Slack)) && m.Reason != StaleRefused && backed(in, terms, p, m) {
				return "logged: " + m.Reason + " (catch-up)"
			}
		}
		return ""
	}
	// claimedByKilled reports whether the term before t was killed within
	// the slack around t and next read the job's last claim at or after t
	// (or found none of its ticks missed): the killed term claimed t and
	// died before the run started.
	claimedByKilled := func(next *Term, t time.Time) bool {
		var prev *Term
		for i, tm := range terms {
			if tm.Token != next.Token && !tm.Start.After(t) && (prev == nil || tm.Start.After(prev.Start)) {
				prev = &terms[i]
			}
		}
		if prev == nil || !prev.Killed || prev.Stop.Before(t.Add(-in.Slack)) || prev.Stop.After(t.Add(in.Slack)) {
			return false
		}
		return readClaimed(next, t)
	}
	// active reports whether tm decided any tick of any job, its catch-up
	// included.
	active := func(tm *Term) bool {
		for _, s := range in.Starts {
			if s.Token == tm.Token && s.Instance == tm.Instance {
				return true
			}
		}
		for _, m := range in.Misfires {
			if m.Token == tm.Token && m.Instance == tm.Instance {
				return true
			}
		}
		return false
	}
	// byNext reports whether the first term starting after t accounts for
	// t, and how; "" if it does not (or there is no such term: next nil).
	// A term that began within the slack around t may have been live at
	// t: if it does not account for t and its instance was frozen at t
	// ("frozen, then ...") or killed within the slack after t, the term
	// after it does; so does the term after one that ended before it
	// decided any tick, or was killed in its catch-up. A term that began
	// later than that and did not account for t lost it.
	byNext := func(t time.Time) (how string, next *Term) {
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
			if how := accountsFor(&terms[i], t); how != "" {
				return prefix + how, next
			}
			if claimedByKilled(&terms[i], t) || ((killedInCatchUp || inFlightKilled) && readClaimed(&terms[i], t)) {
				return prefix + "claimed by a term killed at the tick", next
			}
			if unknownInCatchUp && readClaimed(&terms[i], t) {
				return prefix + "claim of unknown outcome landed", next
			}
			if refused && readClaimed(&terms[i], t) {
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
			case !tm.Stop.IsZero() && !active(&terms[i]):
				// It ended before it decided any tick (its lease lapsed
				// as it began): the term after it accounts for t.
			case frozen(&terms[i], t):
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
			case !tm.Start.After(t) && !tm.Stop.IsZero() && refusedStale(&terms[i], t):
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
	for t := firstTick(p, in.From); !t.After(in.To); t = t.Add(p.Every) {
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
				if c.Token == live.Token && covers(c, t) {
					own = true
					break
				}
			}
			if own {
				account("catch-up")
				continue
			}
		}
		if live != nil {
			if how := steppedOver(in, live, p, t); how != "" {
				account(how)
				continue
			}
		}
		how, next := byNext(t)
		switch {
		case live != nil && !frozen(live, t):
			excuse := ""
			switch {
			case refusedStale(live, t):
				// A later term had fenced the ledger: it accounts for t.
				excuse = "claim refused as stale"
			case live.Killed && inFlight(in, terms, p, job, live, t):
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
					account(excuse + ", no later term")
					continue
				case how != "":
					account(excuse + ", then " + how)
					continue
				case (live.Killed || refusedStale(live, t)) && readClaimed(next, t):
					account(excuse + " (the claim landed)")
					continue
				}
			}
			r.add("lost-tick", "job %s tick %s: term %d (%s) was live and neither ran it nor logged why%s",
				job, t.Format(time.RFC3339Nano), live.Token, live.Instance, unwritten(in, job, t, p.Grace))
		case next == nil:
			// The window ended with nobody leading after t.
			account("no later term")
		case how != "":
			if live != nil && !strings.HasPrefix(how, "frozen, then ") {
				how = "frozen, then " + how
			}
			account(how)
		case refusedBefore(logged[t.UnixNano()], terms, next) && readClaimed(next, t):
			// The term just before next (frozen at t, or stopping
			// within the slack after it) refused its claim of t as
			// stale, as it logged for t itself, and next read t as
			// claimed: the claim had landed (sent before the freeze or
			// the cut), and at most once means nobody runs it.
			account("claim refused as stale by the term before (the claim landed)")
		case live != nil && killedOnWaking(in, live, t) && readClaimed(next, t):
			// Its instance was frozen at t and killed within the slack
			// after waking: its loop fired t late on waking and claimed
			// it (next read the claim), and the kill landed before the
			// run started. At most once: nobody runs it. Killed later,
			// the term outlived its freeze and the live term's rules
			// above judge t.
			account("frozen, then killed as it woke (the claim landed)")
		default:
			lead := "nobody led"
			if live != nil {
				lead = fmt.Sprintf("%s (term %d) was frozen", live.Instance, live.Token)
			}
			r.add("lost-tick", "job %s tick %s: missed while %s, within grace %v of term %d (%s, started %s), and no catch-up run covers it (policy %s)%s",
				job, t.Format(time.RFC3339Nano), lead, p.Grace, next.Token, next.Instance, next.Start.Format(time.RFC3339Nano), p.Misfire, unwritten(in, job, t, p.Grace))
		}
	}
}
