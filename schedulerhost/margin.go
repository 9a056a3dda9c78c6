package schedulerhost

import (
	"context"
	"time"

	"github.com/batonhq/baton/election"
)

// A run does not start in the last moments of a term whose renewal is
// overdue. In a healthy term the local deadline stays well ahead: a
// renewal moves it to TTL - SafetyMargin after the renewal's send, and the
// next one is sent a RenewInterval later, so it never comes nearer than
// TTL - SafetyMargin - RenewInterval (1.4 s at a 3 s TTL). A run that
// finds less than the start margin left waits for the renewal, which
// moves the deadline, or for the term's end, which stops the run before
// it starts ("run not started: term over"). Started anyway, its process
// would be stopped within milliseconds, before doing anything, and the
// tick, claimed, would be run by nobody with no word why.
//
// The margin is maxStartMargin, or a quarter of the term's lead at its
// open (TTL - SafetyMargin) when that is less, so that a short TTL does
// not make every run wait for a renewal in good health.
const maxStartMargin = 250 * time.Millisecond

// startMargin returns the start margin of a term whose base context is
// base, and false when its lease cannot tell its deadline (NewTerm).
func startMargin(base context.Context) (time.Duration, bool) {
	d, ok := election.LocalDeadline(base)
	if !ok {
		return 0, false
	}
	return min(maxStartMargin, max(time.Until(d)/4, 0)), true
}

// marginStep holds a run while its term has less than the start margin
// left (see above). It follows pauseStep, the last round trip before the
// start.
func marginStep(next runFunc) runFunc {
	return func(r *tickRun) {
		if err := r.t.awaitMargin(r); err != nil {
			r.termOver(err)
			return
		}
		next(r)
	}
}

// awaitMargin returns nil once t has at least its start margin left, or
// why t is over. It looks again every few milliseconds: a renewal that
// lands moves the deadline, and the deadline's passing ends t.base.
func (t *termRun) awaitMargin(r *tickRun) error {
	if !t.hasMargin {
		return t.check()
	}
	var waited time.Duration
	var timer *time.Timer
	for {
		d, _ := election.LocalDeadline(t.base)
		left := time.Until(d)
		if left >= t.margin {
			if timer != nil {
				timer.Stop()
				t.h.log.Info("run start waited for the lease renewal", "job", r.job.Name, "tick", r.tick.Time, "token", t.token, "waited", waited, "left", left.Round(time.Millisecond))
			}
			return t.check()
		}
		step := min(max(left, time.Millisecond), 10*time.Millisecond)
		if timer == nil {
			timer = time.NewTimer(step)
		} else {
			timer.Reset(step)
		}
		select {
		case <-t.base.Done():
			timer.Stop()
			return context.Cause(t.base)
		case <-timer.C:
			waited += step
		}
	}
}
