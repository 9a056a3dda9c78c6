package history

import "time"

// StaleRefused is the reason with which an instance does not start a tick
// whose claim the ledger refused because a later term had fenced it: not
// an excuse by itself, the later term must then account for the tick.
const StaleRefused = "claim refused: term is stale; stopping"

// AlreadyClaimed is the reason with which an instance does not start a
// tick whose claim the ledger refused: another term had claimed it.
const AlreadyClaimed = "run not started: tick already claimed"

// backed reports whether the records agree with the reason m gives for
// not starting its tick of a fixed-period job (p.Every > 0: checkTicks);
// a reason they cannot check is taken as logged.
//   - StillGoing: the job's latest run on m's instance before the tick
//     had not ended (its end line, if the history has them, came after
//     the skip, less the slack, or while the instance was frozen, which
//     it woke from just before the skip; its process had not been
//     killed); or m's term let a tick of the job (one it was live for,
//     or its catch-up's, started or not) go unstarted by the skip, and not skipped,
//     within the claim timeout before (its claim in flight: the run
//     admitted, not started), or within its pre-start bound: from its
//     admission (its tick, or the start of the term's schedule loop if
//     later), its claim within the claim timeout and the read of the
//     pauses after it within PauseRead (preStart).
//   - TermStopping: m's term had stopped (its step-down or its loss) by
//     the line, less the slack.
//   - AlreadyClaimed: another term, with a lower token, was live at the
//     tick (it began before the refusal and had not stopped before the
//     tick): it may have claimed the tick and died before the run.
func backed(in Input, terms []Term, p Policy, m Misfire) bool {
	switch m.Reason {
	case StillGoing:
		// The job's runs on an instance go one at a time: the one that
		// could be going is its latest before the tick.
		var last *Start
		for i, s := range in.Starts {
			if s.Job == m.Job && s.Instance == m.Instance && s.Tick.Before(m.Tick) && !s.At.After(m.At.Add(in.Slack)) &&
				(last == nil || s.Tick.After(last.Tick)) {
				last = &in.Starts[i]
			}
		}
		if last != nil {
			going := true
			for _, e := range in.Ends {
				if e.Job == last.Job && e.Token == last.Token && e.Instance == last.Instance && e.Tick.Equal(last.Tick) && e.At.Before(m.At.Add(-in.Slack)) &&
					!unreaped(in, m, e.At) && !stalled(in, m.Instance, e.At, m.At.Add(-in.Slack)) {
					going = false // it had ended, and its instance could see it
				}
			}
			for _, tm := range terms {
				if tm.Token == last.Token && tm.Instance == last.Instance && tm.Killed && tm.Stop.Before(m.At) {
					going = false // its process had been killed
				}
			}
			if going {
				return true
			}
		}
		var term *Term
		for i, tm := range terms {
			if tm.Token == m.Token && tm.Instance == m.Instance {
				term = &terms[i]
			}
		}
		if term == nil {
			return false
		}
		// caughtUp reports whether m's term had a catch-up run of t, a
		// tick before the term began: its claim was made as the term
		// began, before the schedule loop. It started, or the term read a
		// last claim of the job before t and t is a tick its catch-up
		// runs (run-once: the last before the term began, which its one
		// run takes; run-all: any), so the run was admitted whether or
		// not it started.
		caughtUp := func(t time.Time) bool {
			for _, s := range in.Starts {
				if s.Job == m.Job && s.Token == m.Token && s.CatchUp && s.Tick.Equal(t) {
					return true
				}
			}
			switch p.Misfire {
			case "skip":
				return false
			case "run-all":
			default: // run-once
				if !t.Add(p.Every).After(term.Start.Add(-in.Slack)) {
					return false
				}
			}
			for _, c := range in.LastClaims {
				if c.Token == m.Token && c.Instance == m.Instance && c.Job == m.Job && !c.Tick.IsZero() && c.Tick.Before(t) {
					return true
				}
			}
			return false
		}
		// The job's ticks before m's, back to the claim timeout, or to
		// the pre-start bound from their admission: one that m's term
		// was live for (or caught up) and had neither started nor logged
		// by the skip (less the slack) was still being claimed.
		pre, loop := preStart(in, term)
		lo := m.Tick.Add(-in.ClaimTimeout - in.Slack)
		if !m.At.After(loop.Add(pre + in.Slack)) {
			lo = earliest(lo, term.Start.Add(-in.Slack))
		} else {
			lo = earliest(lo, m.At.Add(-pre-in.Slack))
		}
		for t := m.Tick.Add(-p.Every); !t.Before(lo); t = t.Add(-p.Every) {
			if t.Before(term.Start.Add(-in.Slack)) && !caughtUp(t) {
				continue
			}
			decided := false // started since t, or t skipped
			for _, s := range in.Starts {
				// A start after the skip (less the slack) was still being
				// claimed at it.
				if s.Job == m.Job && s.Token == m.Token && !s.Tick.Before(t) && s.Tick.Before(m.Tick) && s.At.Before(m.At.Add(-in.Slack)) {
					decided = true
				}
			}
			for _, o := range in.Misfires {
				// Logged within the slack before the skip, its run may
				// still have counted as active at the skip.
				if o.Job == m.Job && o.Token == m.Token && o.Instance == m.Instance && o.Tick.Equal(t) && o.At.Before(m.At.Add(-in.Slack)) {
					decided = true
				}
			}
			if !decided {
				return true
			}
		}
		return false
	case TermStopping:
		// Its term had stopped (stepping down, or lost) by the line.
		for _, tm := range terms {
			if tm.Token == m.Token && tm.Instance == m.Instance {
				return !tm.Stop.IsZero() && !tm.Stop.After(m.At.Add(in.Slack))
			}
		}
		return false
	case AlreadyClaimed:
		for _, tm := range terms {
			if tm.Token < m.Token && !tm.Start.After(m.At) && (tm.Stop.IsZero() || !tm.Stop.Before(m.Tick.Add(-in.Slack))) {
				return true
			}
		}
		return false
	}
	return true
}

// unreaped reports whether m's instance was frozen (SIGSTOP) from within
// the slack before a run's end at end, and woke within the slack before
// m's skip: the run had ended, but the frozen instance had not reaped it,
// and on waking its loop may fire the tick before it does.
func unreaped(in Input, m Misfire, end time.Time) bool {
	for _, f := range in.Frozen {
		if f.Instance == m.Instance && !end.Before(f.From.Add(-in.Slack)) && !end.After(f.To) &&
			!m.At.Before(f.To) && !m.At.After(f.To.Add(in.Slack)) {
			return true
		}
	}
	return false
}

// stalled reports whether a job's heartbeats on instance (Heartbeats)
// show its machine stalled from from to to: two heartbeats of one run,
// the first at or before from and the second at or after to, that came
// later than the job's sleep allows by at least to - from. The
// 2026-11-29 mysql soak found one: node-4-44 skipped tick 00:41:26 of
// "tick" 236 ms after that job's end line for tick 25, when the drain
// job's heartbeats on it came 506 and 617 ms apart (250 ms sleep).
func stalled(in Input, instance string, from, to time.Time) bool {
	var prev *Record
	for i, r := range in.Records {
		every, ok := in.Heartbeats[r.Job]
		if r.Kind != "H" || r.Instance != instance || !ok {
			continue
		}
		if prev != nil && prev.Job == r.Job && prev.Token == r.Token && prev.Tick.Equal(r.Tick) &&
			!prev.At.After(from) && !r.At.Before(to) && r.At.Sub(prev.At)-every >= to.Sub(from) {
			return true
		}
		prev = &in.Records[i]
	}
	return false
}

// neverClaimed reports whether next logged that the ledger held no claim
// of job yet, and the records hold no run of it at or before t.
func neverClaimed(in Input, job string, next *Term, t time.Time) bool {
	said := false
	for _, c := range in.LastClaims {
		if c.Token == next.Token && c.Instance == next.Instance && c.Job == job && c.Tick.IsZero() {
			said = true
		}
	}
	if !said {
		return false
	}
	for _, s := range in.Starts {
		if s.Job == job && !s.Tick.After(t) {
			return false
		}
	}
	return true
}

// stamp formats t for a violation, "open" when it is zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "open"
	}
	return t.Format(time.RFC3339Nano)
}

// frozenAt reports whether tm's instance was frozen at t and tm did not
// survive it: tm stopped by the wake, or a later term had begun by then.
// A term that outlived its freeze runs its late ticks on waking. A pause
// of the whole machine (ClockSteps) freezes every instance; there the
// wake is a TTL after the span's end, as a lapsed lease is only found
// out then (the local deadline is on the monotonic clock, which the
// pause stopped).
func frozenAt(in Input, terms []Term, tm *Term, t time.Time) bool {
	lost := func(wake time.Time) bool {
		if !tm.Stop.IsZero() && !tm.Stop.After(wake) {
			return true
		}
		for _, o := range terms {
			if o.Token > tm.Token && !o.Start.After(wake) {
				return true
			}
		}
		return false
	}
	for _, f := range in.Frozen {
		if f.Instance == tm.Instance && inSpan(t, f.From, f.To, in.Slack) && lost(f.To.Add(in.Slack)) {
			return true
		}
	}
	for _, c := range in.ClockSteps {
		if inSpan(t, c.From, c.To, in.Slack) && lost(c.To.Add(in.TTL+in.Slack)) {
			return true
		}
	}
	return false
}

// killedOnWaking reports whether the suite killed tm within the slack
// after the end of a freeze of its instance that t lies in (the wake at
// or before the kill): the loop fires t late on waking, so the kill may
// land between t's claim and its run.
func killedOnWaking(in Input, tm *Term, t time.Time) bool {
	if !tm.Killed {
		return false
	}
	for _, f := range in.Frozen {
		if f.Instance == tm.Instance && inSpan(t, f.From, f.To, in.Slack) &&
			!tm.Stop.Before(f.To) && !tm.Stop.After(f.To.Add(in.Slack)) {
			return true
		}
	}
	return false
}

// inSpan reports whether t lies within [from, to] widened by slack on
// each side.
func inSpan(t, from, to time.Time, slack time.Duration) bool {
	return !t.Before(from.Add(-slack)) && !t.After(to.Add(slack))
}

// steppedOver reports how a tick t that live term tm did not run is
// accounted for by a pause of the whole machine that tm survived: the
// suite saw the pause (ClockSteps), tm logged the forward step of the
// wall clock whose skipped-over ticks include t (Steps), and the job's
// policy let t go: skip, or t beyond the grace before the step's end
// (schedulerhost runs, as one catch-up, the last tick within it). ""
// if not.
func steppedOver(in Input, tm *Term, p Policy, t time.Time) string {
	seen := false
	for _, c := range in.ClockSteps {
		seen = seen || inSpan(t, c.From, c.To, in.Slack)
	}
	if !seen {
		return ""
	}
	for _, s := range in.Steps {
		if s.Instance != tm.Instance || s.Token != tm.Token || !t.After(s.From) || t.After(s.To) {
			continue
		}
		switch {
		case p.Misfire == "skip":
			return "skipped over by a clock step, skip policy"
		case s.To.Sub(t) > p.Grace:
			return "skipped over by a clock step, beyond grace"
		}
	}
	return ""
}

// notFired reports whether tm ended before its schedule loop began, with
// t among the ticks of job it logged as not fired, and within two claim
// timeouts of its start (its catch-up's read of the last claims and its
// claims, each bounded by the claim timeout, hold the loop back).
func notFired(in Input, tm *Term, job string, t time.Time) bool {
	if tm.Stop.IsZero() || t.After(tm.Start.Add(2*in.ClaimTimeout+in.Slack)) {
		return false
	}
	for _, n := range in.NotFired {
		if n.Instance == tm.Instance && n.Token == tm.Token && n.Job == job && !t.Before(n.First) && !t.After(n.Until) {
			return true
		}
	}
	return false
}

// loopRanJob reports whether tm's schedule loop decided a tick of job: a
// start that is not a catch-up, or a tick after the term's start logged
// as not started, other than skipped as "previous run still going". A
// term's loop may run other jobs' ticks while job's catch-up claim is
// still out, and skip job's next tick for that catch-up run: callers
// pair it with ranJob, so that the run still going can only be the
// catch-up's, not begun.
func loopRanJob(in Input, tm *Term, job string) bool {
	for _, s := range in.Starts {
		if s.Token == tm.Token && s.Instance == tm.Instance && s.Job == job && !s.CatchUp {
			return true
		}
	}
	for _, m := range in.Misfires {
		if m.Token == tm.Token && m.Instance == tm.Instance && m.Job == job && m.Tick.After(tm.Start) && m.Reason != StillGoing {
			return true
		}
	}
	return false
}

// ranJob reports whether tm started any run of job, by the job's records.
func ranJob(in Input, tm *Term, job string) bool {
	for _, s := range in.Starts {
		if s.Token == tm.Token && s.Instance == tm.Instance && s.Job == job {
			return true
		}
	}
	return false
}

// inCatchUp reports whether tm ended within its catch-up's bound: the
// read of the last claims and the claims, each within the claim timeout,
// after its start.
func inCatchUp(in Input, tm *Term) bool {
	return !tm.Stop.IsZero() && !tm.Stop.After(tm.Start.Add(2*in.ClaimTimeout+in.Slack))
}

// catchUpRefused reports whether tm logged its catch-up's claim of job,
// of a tick at or after t (one its catch-up run would stand for t with),
// as refused as stale.
func catchUpRefused(in Input, tm *Term, job string, t time.Time) bool {
	for _, m := range in.Misfires {
		if m.Token == tm.Token && m.Instance == tm.Instance && m.Job == job && m.Reason == StaleRefused &&
			!m.Tick.Before(t) && !m.Tick.After(tm.Start.Add(in.Slack)) {
			return true
		}
	}
	return false
}

// askedAgain reports whether tm asked its catch-up's claim of job, of a
// tick at or after t, again: an answer lost, the claim may have landed.
// A term that ends so, its run not begun, loses the tick at most once.
func askedAgain(in Input, tm *Term, job string, t time.Time) bool {
	for _, a := range in.Asked {
		if a.Token == tm.Token && a.Instance == tm.Instance && a.Job == job && !a.Tick.Before(t) && !a.Tick.After(tm.Start.Add(in.Slack)) {
			return true
		}
	}
	return false
}
