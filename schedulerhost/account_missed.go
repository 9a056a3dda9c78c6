package schedulerhost

import (
	"time"

	"github.com/batonhq/baton/audit"
)

// missedTail is how far back from the end of a span of missed ticks too
// long to walk (over maxMissedScan ticks) the accountant walks again to
// record its newest ticks: the default window of an audit. The ticks
// between the maxMissedScan first and those are not recorded: a report
// reaching back to them counts them missed, unaccounted.
const missedTail = 24 * time.Hour

// missed records what j's misfire policy made of its ticks from first
// through until (missed while nobody led, why no-leader, or skipped over
// by a clock step, why clock-step): inGrace and run as missed computed
// them (catchup.go). The ticks not run are missed, each once, except,
// with MisfireRunOnce, those from the first within the grace through the
// one before the catch-up run's tick: covered by it. The catch-up runs'
// own ticks are recorded by their finish. nobodyUntil is the term's
// start, for ticks missed while nobody led.
func (a *accountant) missed(j *jobState, first, until time.Time, inGrace, run []time.Time, why audit.Reason, nobodyUntil time.Time) {
	if a == nil {
		return
	}
	end, inclusive := until, true
	if len(run) > 0 {
		end, inclusive = run[0], false
		if j.Misfire == MisfireRunOnce {
			end = inGrace[0]
			if cover := inGrace[:len(inGrace)-1]; len(cover) > 0 {
				a.add(j, audit.Range{Class: audit.Covered, Reason: audit.ReasonCatchUp, First: cover[0], Last: cover[len(cover)-1],
					Count: int64(len(cover)), Token: a.t.token, Instance: a.t.h.cfg.Instance, By: run[0]})
			}
		}
	}
	a.missedSpan(j, first, end, inclusive, why, nobodyUntil)
}

// missedSpan records j's ticks from first through end (end itself if
// inclusive) as missed for why. Past maxMissedScan ticks, it records the
// first maxMissedScan, then those of the last missedTail before end (at
// most maxMissedScan more).
func (a *accountant) missedSpan(j *jobState, first, end time.Time, inclusive bool, why audit.Reason, nobodyUntil time.Time) {
	if a == nil {
		return
	}
	next := a.t.nextOf(j)
	before := func(tm time.Time) bool { return tm.Before(end) || inclusive && tm.Equal(end) }
	r, capped := walkTicks(next, first, before)
	if r.Count == 0 {
		return
	}
	r.Class, r.Reason, r.NobodyUntil = audit.Missed, why, nobodyUntil
	a.add(j, r)
	if !capped {
		return
	}
	tail, _ := walkTicks(next, next(laterOf(r.Last, end.Add(-missedTail))), before)
	tail.Class, tail.Reason, tail.NobodyUntil = audit.Missed, why, nobodyUntil
	a.add(j, tail)
}

// walkTicks returns the range of the ticks of next from first on while
// before says so, at most maxMissedScan of them (capped says it stopped
// there).
func walkTicks(next audit.Next, first time.Time, before func(time.Time) bool) (r audit.Range, capped bool) {
	for tm := first; !tm.IsZero() && before(tm); tm = next(tm) {
		if r.Count == maxMissedScan {
			return r, true
		}
		if r.Count == 0 {
			r.First = tm
		}
		r.Last = tm
		r.Count++
	}
	return r, false
}
