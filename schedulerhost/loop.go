package schedulerhost

import (
	"context"
	"time"
)

// starting is a due tick admitted to start, with its claim turn.
type starting struct {
	dueTick
	tn turn
}

// loop fires ticks from the first one after the term's start until ctx
// ends. One timer over a heap of instants, on schedule time (clock.go); at
// each wake the due runs start first, then the next ticks are computed
// (once per distinct schedule and tick). Ticks a forward step of the wall
// clock skipped over go to skipOver instead. A new job set (SetJobs) is
// taken in at the next wake (reloaded).
func (t *termRun) loop(ctx context.Context, sc *schedClock) {
	h := t.h
	tl := newTimeline()
	h.mu.Lock()
	jobs := h.jobs
	t.pending = nil // the versions SetJobs gives from now on are taken in by reloaded
	h.mu.Unlock()
	for _, j := range jobs {
		t.setNext(tl, j, j.sched.Next(laterOf(sc.at, j.since).In(h.cfg.Location)))
	}
	timer := h.clock.newTimer(time.Hour)
	defer timer.Stop()
	type memo struct{ tick, next time.Time }
	nextOf := map[string]memo{} // by schedule spec: jobs sharing a spec share Next
	var due, skipped []dueTick
	var gapFrom, gapTo time.Time // ticks in (gapFrom, gapTo] were skipped over by a step
	reload := false              // SetJobs gave versions to take in
	for ctx.Err() == nil {
		now, expected, step := sc.read()
		if step > 0 {
			gapFrom, gapTo = expected, now
			h.log.Warn("wall clock stepped forward: the ticks it skipped over count as missed", "token", t.token, "step", step, "from", expected, "to", now)
		} else if step < 0 {
			h.log.Warn("wall clock stepped back: ticks go on with the monotonic clock", "token", t.token, "step", step, "ahead_of_wall_clock", sc.ahead)
		}
		select {
		case <-t.wake:
			reload = true
		default:
		}
		if reload {
			reload = false
			t.reloaded(tl, now)
		}
		due, skipped = due[:0], skipped[:0]
		for b := tl.popDue(now); b != nil; b = tl.popDue(now) {
			for _, d := range b.due {
				if d.job.retired.Load() { // SetJobs replaced or removed it
					t.retiredTick(d)
					continue
				}
				if inGap(d.tick, gapFrom, gapTo) {
					skipped = append(skipped, d)
				} else {
					due = append(due, d)
				}
			}
			tl.reuse(b)
		}
		if len(due)+len(skipped) == 0 {
			sleep := maxSleep
			if first, ok := tl.first(); ok {
				sleep = min(first.Sub(now), maxSleep)
			}
			timer.Reset(sleep)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			case <-t.wake:
				reload = true // taken in at the top of the loop
			}
			continue
		}
		t.fireAll(due)
		clear(nextOf)
		for _, d := range due {
			m, ok := nextOf[d.job.Schedule]
			if !ok || !m.tick.Equal(d.tick) {
				m = memo{d.tick, d.job.sched.Next(d.tick)}
				nextOf[d.job.Schedule] = m
			}
			next := m.next
			if inGap(next, gapFrom, gapTo) {
				next = t.skipOver(d.job, next, gapTo)
			}
			t.setNext(tl, d.job, next)
		}
		for _, d := range skipped {
			t.setNext(tl, d.job, t.skipOver(d.job, d.tick, gapTo))
		}
	}
}

func inGap(tick, from, to time.Time) bool {
	return !to.IsZero() && tick.After(from) && !tick.After(to)
}

// setNext makes next the next tick of j (none if zero). If SetJobs
// retired j, next is only kept for the version replacing it, if it has
// not been taken in yet (reloaded).
func (t *termRun) setNext(tl *timeline, j *jobState, next time.Time) {
	j.mu.Lock()
	if j.retired.Load() {
		if j.scheduled == j {
			j.next = next
		}
		j.mu.Unlock()
		return
	}
	j.next, j.scheduled = next, j
	j.mu.Unlock()
	if !next.IsZero() {
		tl.add(j, next)
	}
}

// reloaded takes in the versions SetJobs gave since the last call, at
// schedule time now. A version that replaces one with the same schedule
// takes over its next tick; any other starts from its schedule's first
// tick after now and after the reload (no catch-up of earlier ticks). The
// versions replaced or removed are retired: their ticks still in tl are
// dropped as they come due.
func (t *termRun) reloaded(tl *timeline, now time.Time) {
	h := t.h
	h.mu.Lock()
	pending := t.pending
	t.pending = nil
	h.mu.Unlock()
	for _, j := range pending {
		j.mu.Lock()
		prev, next := j.scheduled, j.next
		j.mu.Unlock()
		if prev == j {
			continue
		}
		if prev == nil || prev.Schedule != j.Schedule {
			next = j.sched.Next(laterOf(now, j.since).In(h.cfg.Location))
		}
		t.setNext(tl, j, next)
	}
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// fireAll fires a batch of due ticks: each starts a run unless a stop or
// the overlap policy says otherwise. The runs start before anything else
// is done with the batch.
func (t *termRun) fireAll(due []dueTick) {
	var skipped []dueTick
	start := t.startBuf[:0]
	for _, d := range due {
		if !t.begin() {
			break
		}
		ok, skip, tn := t.admit(d.job, d.tick)
		if ok {
			start = append(start, starting{d, tn})
			continue
		}
		t.end()
		if skip {
			skipped = append(skipped, d)
		}
	}
	if t.claims != nil {
		t.claims.expectN(len(start))
	}
	mark := t.markPauses() // the instant's runs share a read of the pauses started after this
	for _, d := range start {
		go t.runTick(d.job, d.tick, d.tn, mark)
	}
	t.startBuf = start
	for _, d := range skipped {
		t.skippedTick(d.job, d.tick)
	}
}
