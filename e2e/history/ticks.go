package history

import (
	"fmt"
	"time"
)

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
	// t, and how; "" if it does not (or there is no such term: next nil).
	byNext := func(t time.Time) (how string, next *Term) {
		for i, tm := range terms {
			// A term that began within the slack before t but stopped
			// before t (killed at once) is not the one after t.
			if tm.Start.After(t.Add(-in.Slack)) && (tm.Stop.IsZero() || !tm.Stop.Before(t)) {
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

// stamp formats t for a violation, "open" when it is zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "open"
	}
	return t.Format(time.RFC3339Nano)
}
