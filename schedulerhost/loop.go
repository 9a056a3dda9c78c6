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
// clock skipped over go to skipOver instead.
func (t *termRun) loop(ctx context.Context, sc *schedClock) {
	h := t.h
	tl := newTimeline()
	for _, j := range h.jobs {
		t.setNext(tl, j, j.sched.Next(sc.at.In(h.cfg.Location)))
	}
	timer := h.clock.newTimer(time.Hour)
	defer timer.Stop()
	type memo struct{ tick, next time.Time }
	nextOf := map[string]memo{} // by schedule spec: jobs sharing a spec share Next
	var due, skipped []dueTick
	var gapFrom, gapTo time.Time // ticks in (gapFrom, gapTo] were skipped over by a step
	for ctx.Err() == nil {
		now, expected, step := sc.read()
		if step > 0 {
			gapFrom, gapTo = expected, now
			h.log.Warn("wall clock stepped forward: the ticks it skipped over count as missed", "token", t.token, "step", step, "from", expected, "to", now)
		} else if step < 0 {
			h.log.Warn("wall clock stepped back: ticks go on with the monotonic clock", "token", t.token, "step", step, "ahead_of_wall_clock", sc.ahead)
		}
		due, skipped = due[:0], skipped[:0]
		for b := tl.popDue(now); b != nil; b = tl.popDue(now) {
			for _, d := range b.due {
				if inGap(d.tick, gapFrom, gapTo) {
					skipped = append(skipped, d)
				} else {
					due = append(due, d)
				}
			}
			tl.reuse(b)
		}
		if len(due)+len(skipped) == 0 {
			first, ok := tl.first()
			if !ok {
				<-ctx.Done()
				return
			}
			timer.Reset(min(first.Sub(now), maxSleep))
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
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

// setNext makes next the next tick of j (none if zero).
func (t *termRun) setNext(tl *timeline, j *jobState, next time.Time) {
	j.mu.Lock()
	j.next = next
	j.mu.Unlock()
	if !next.IsZero() {
		tl.add(j, next)
	}
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
	for _, d := range start {
		go t.runTick(d.job, d.tick, d.tn)
	}
	t.startBuf = start
	for _, d := range skipped {
		t.skippedTick(d.job, d.tick)
	}
}
