package schedulerhost

import (
	"time"

	"github.com/batonhq/baton/audit"
)

// Admission: the overlap policy, and who runs a queued tick.
//
// A job's active count is every run of the job going in this process,
// whichever term started it: a run abandoned by an earlier term (it
// ignored its cancellation and outlived Lead) still counts, so a new
// term's tick of that job is an overlap (skipped, queued or run beside it
// as the policy says), and when the abandoned run finally returns it
// uncounts itself, not one of the new term's runs. The queue belongs to
// the term leading now (Lead empties it at the start, the drain at the
// end).

// maxQueue bounds a job's queue of waiting ticks (OverlapQueue).
const maxQueue = 100

// queued is a tick waiting for the job's earlier run (OverlapQueue).
type queued struct {
	tick    time.Time
	catchUp bool
	job     *jobState // the version of the job the tick was admitted for (SetJobs may replace it meanwhile)
}

// admit applies the overlap policy to a tick of j: ok says a run may
// start now (counted active, with its claim turn); otherwise the tick is
// queued (OverlapQueue with room left) or skipped (skip says so, and it is
// counted).
func (t *termRun) admit(j *jobState, tick time.Time) (ok, skip bool, tn turn) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.active > 0 {
		switch j.Overlap {
		case OverlapSkip:
			j.skipped++
			return false, true, turn{}
		case OverlapQueue:
			if len(j.queue) >= maxQueue {
				j.skipped++
				return false, true, turn{}
			}
			j.queue = append(j.queue, queued{tick: tick, job: j})
			return false, false, turn{}
		}
	}
	j.active++
	return true, false, t.takeTurn(j)
}

// admitCatchUp applies the overlap policy to a batch of catch-up ticks of
// j, run one after another by one run: ok says the batch may start
// (counted active once, with one claim turn for all its claims).
// Otherwise its ticks are queued, or skipped and logged.
func (t *termRun) admitCatchUp(j *jobState, ticks []time.Time) (ok bool, tn turn) {
	j.mu.Lock()
	if j.active == 0 || j.Overlap == OverlapAllow {
		j.active++
		tn = t.takeTurn(j)
		j.mu.Unlock()
		return true, tn
	}
	var skipped []time.Time
	for _, tick := range ticks {
		if j.Overlap == OverlapQueue && len(j.queue) < maxQueue {
			j.queue = append(j.queue, queued{tick: tick, catchUp: true, job: j})
			continue
		}
		j.skipped++
		skipped = append(skipped, tick)
	}
	j.mu.Unlock()
	for _, tick := range skipped {
		t.skippedTick(j, tick)
	}
	return false, turn{}
}

// skippedTick logs and counts a tick the overlap policy did not run.
func (t *termRun) skippedTick(j *jobState, tick time.Time) {
	h := t.h
	if j.Overlap == OverlapQueue {
		h.log.Warn("tick skipped: queue full", "job", j.Name, "tick", tick, "queued", maxQueue)
	} else {
		h.log.Warn("tick skipped: previous run still going", "job", j.Name, "tick", tick, "overlap", j.Overlap)
	}
	if h.cfg.Observer != nil {
		h.cfg.Observer.OverlapSkipped(j.Name)
	}
	t.acct.tick(j, tick, audit.Skipped, audit.ReasonOverlap, "")
}

// nextQueued is called by a run of j (started by term t) that has finished
// its ticks, with j.mu held. If the queue holds a tick the run may take
// next (t leads, is not stopping, and this is the only run of j going),
// it pops and returns it: the run goes on with it, still counted.
// Otherwise the run stops counting; if it was the last run of j going and
// the queue, which belongs to a later term, was waiting for it, that term
// is given the next queued tick as a new run (counted), which the caller
// starts with the returned term.
func (t *termRun) nextQueued(j *jobState) (q queued, take bool, to *termRun) {
	if len(j.queue) > 0 && j.active == 1 && j.term == t && !t.stopping.Load() && t.live() {
		q, j.queue = j.queue[0], j.queue[1:]
		return q, true, nil
	}
	j.active--
	if cur := j.term; j.active == 0 && len(j.queue) > 0 && cur != nil && cur != t && cur.live() && cur.begin() {
		q, j.queue = j.queue[0], j.queue[1:]
		j.active++
		return q, false, cur
	}
	return queued{}, false, nil
}
