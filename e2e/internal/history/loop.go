package history

import (
	"fmt"
	"time"
)

// loopRan reports whether tm's schedule loop decided any tick: a start
// that is not a catch-up, or a tick after the term's start logged as not
// started.
func loopRan(in Input, tm *Term) bool {
	for _, s := range in.Starts {
		if s.Token == tm.Token && s.Instance == tm.Instance && !s.CatchUp {
			return true
		}
	}
	for _, m := range in.Misfires {
		if m.Token == tm.Token && m.Instance == tm.Instance && m.Tick.After(tm.Start) {
			return true
		}
	}
	return false
}

// inFlight reports whether tm had the claim of job's tick t in flight:
// tm stopped within the claim timeout after t, and it asked for it again,
// or it skipped a later tick of the job because a run was still going (as
// the records back) and started none since t (t was admitted and its run
// had not started).
func inFlight(in Input, terms []Term, p Policy, job string, tm *Term, t time.Time) bool {
	if tm.Stop.After(t.Add(in.ClaimTimeout + in.Slack)) {
		return false // the claim had been decided, one way or the other
	}
	for _, a := range in.Asked {
		if a.Instance == tm.Instance && a.Token == tm.Token && a.Job == job && a.Tick.Equal(t) {
			return true
		}
	}
	for _, m := range in.Misfires {
		if m.Instance != tm.Instance || m.Token != tm.Token || m.Job != job || !m.Tick.After(t) || m.Reason != StillGoing || !backed(in, terms, p, m) {
			continue
		}
		started := false
		for _, s := range in.Starts {
			if s.Token == tm.Token && s.Job == job && s.Tick.After(t) && s.Tick.Before(m.Tick) {
				started = true
			}
		}
		if !started {
			return true
		}
	}
	return false
}

// preStart returns the longest a tick of tm may go from its admission to
// its start (its claim, within the claim timeout, then the read of the
// pauses, within PauseRead), and the latest time tm's schedule loop can
// have begun, when the ticks that fired during its catch-up were
// admitted: by its first event (a run, or a decision on a tick after the
// term's start), and by the catch-up's own bound, its read of the last
// claims and its claims, each within the claim timeout.
func preStart(in Input, tm *Term) (time.Duration, time.Time) {
	loop := tm.Start.Add(2 * in.ClaimTimeout)
	for _, s := range in.Starts {
		if s.Token == tm.Token && s.Instance == tm.Instance && !s.CatchUp && s.At.Before(loop) {
			loop = s.At
		}
	}
	for _, m := range in.Misfires {
		if m.Token == tm.Token && m.Instance == tm.Instance && m.Tick.After(tm.Start) && m.At.Before(loop) {
			loop = m.At
		}
	}
	return in.ClaimTimeout + in.PauseRead, loop
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// refusedBefore reports whether the term just before next (a lower token,
// with no term between them) refused its claim of the tick as stale,
// among the misfires logged for the tick.
func refusedBefore(logged []Misfire, terms []Term, next *Term) bool {
	for _, m := range logged {
		if m.Reason != StaleRefused || m.Token >= next.Token {
			continue
		}
		between := false
		for _, tm := range terms {
			if tm.Token > m.Token && tm.Token < next.Token {
				between = true
			}
		}
		if !between {
			return true
		}
	}
	return false
}

// unwritten says, for a lost tick's violation, which instances logged a
// run of job standing for t as started of which the job wrote no line
// (a catch-up run stands for the ticks before its own: any of them from
// t through the grace counts); "" if none did.
func unwritten(in Input, job string, t time.Time, grace time.Duration) string {
	out := ""
	for _, u := range in.Unwritten {
		if u.Job == job && !u.Tick.Before(t) && !u.Tick.After(t.Add(grace)) {
			out += fmt.Sprintf("; %s (term %d) logged tick %s's run as started at %s, and the job wrote no line of it",
				u.Instance, u.Token, u.Tick.Format(time.RFC3339), u.At.Format(time.RFC3339Nano))
		}
	}
	return out
}

// firstTick returns the first tick of p after from (see Policy.Epoch).
func firstTick(p Policy, from time.Time) time.Time {
	if !p.Epoch {
		return from.Truncate(p.Every).Add(p.Every)
	}
	base := time.Unix(0, 0).Add(p.Offset)
	since := from.Sub(base)
	k := since / p.Every
	if since%p.Every < 0 {
		k-- // before the base: the tick at or before from, not after it
	}
	return base.Add((k + 1) * p.Every)
}
