package schedulerhost

import (
	"reflect"
	"slices"
	"time"
)

// Reloads: SetJobs replaces the job set, also while leading, in the same
// term.
//
// Each job of a Host is a version (jobState: settings, schedule and
// pipeline, never modified) and a jobLife that every version of the same
// name shares (runs going, queue, claim turns, next tick, recent runs), so
// that the overlap policy, the claim order and the history go on across a
// reload. SetJobs makes a new version of every job of the new set, retires
// the old versions and hands the new ones to the term's loop (pending,
// wake), which takes them in at its next wake (loop.go, reloaded): a
// retired version's tick still in the timeline is dropped when it comes
// due, so the timeline needs no removal.

// JobChanges says what SetJobs changed, by job name, in the order of the
// new set (Removed: of the old one). A job is changed when any of its
// settings other than Run differs; Run is always the new set's.
type JobChanges struct {
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Changed   []string `json:"changed"`
	Unchanged []string `json:"unchanged"`
}

// SetJobs replaces the job set with jobs. It validates the whole set first,
// as New does and with the same errors; on an error nothing changes. It
// does not block on I/O, and may be called at any time, from any
// goroutine, while leading or not; a term in progress goes on (same term,
// same token) with the new set:
//
//   - an added job's first tick is its schedule's first after the reload;
//     the ticks before it are not caught up, in this term or the next;
//   - a removed job gets no new tick, and ticks queued for it
//     (OverlapQueue) are dropped; a run of it in flight is not cancelled:
//     it finishes, is recorded, and a stop still waits for it. Status lists
//     the job, Removed, until that run returns;
//   - a job whose Schedule changed takes the new schedule from now: its
//     next tick is the new schedule's first after the reload (the pending
//     tick of the old one is dropped), with no catch-up before it. For
//     @every, a new interval or offset moves the phase: the ticks are the
//     new interval's multiples since the epoch (plus the new offset);
//     those of the old one after the reload do not run;
//   - any other job keeps its next tick; changed settings (Timeout,
//     Overlap, Misfire, ...) and the new Run apply from that tick on.
//
// Runs in flight, and ticks queued (OverlapQueue), run with the settings
// of the set they were admitted under, and count for the job's overlap
// policy whatever its new settings. A tick due at the very moment of the reload
// may still fire with the old set.
func (h *Host) SetJobs(jobs []Job) (JobChanges, error) {
	c := h.cfg
	c.Jobs = jobs
	if err := c.Validate(); err != nil {
		return JobChanges{}, err
	}
	c = c.withDefaults()
	next, err := h.newJobs(c.Jobs)
	if err != nil {
		return JobChanges{}, err
	}
	now := h.wallNow()
	var ch JobChanges

	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.term
	old := make(map[string]*jobState, len(h.jobs))
	for _, j := range h.jobs {
		old[j.Name] = j
	}
	removed := make(map[string]*jobState, len(h.removed))
	for _, j := range h.removed {
		removed[j.Name] = j
	}
	var newlyRemoved []*jobState
	for _, j := range next {
		prev := old[j.Name]
		if prev == nil {
			ch.Added = append(ch.Added, j.Name)
			j.since = now
			t.acctSpec(j, now)
			if r := removed[j.Name]; r != nil {
				// Its removed version still runs: the new one counts it.
				j.jobLife = r.jobLife
				delete(removed, j.Name)
			}
			j.mu.Lock()
			j.term, j.queue, j.next, j.scheduled = t, nil, time.Time{}, nil
			j.mu.Unlock()
			continue
		}
		delete(old, j.Name)
		if sameSettings(prev.Job, j.Job) {
			ch.Unchanged = append(ch.Unchanged, j.Name)
		} else {
			ch.Changed = append(ch.Changed, j.Name)
		}
		j.since = prev.since
		if prev.Schedule != j.Schedule {
			j.since = now
			t.acctSpec(j, now)
		}
		j.jobLife = prev.jobLife
		prev.mu.Lock()
		prev.retired.Store(true)
		prev.mu.Unlock()
	}
	for _, prev := range h.jobs {
		if old[prev.Name] == nil {
			continue
		}
		ch.Removed = append(ch.Removed, prev.Name)
		prev.mu.Lock()
		prev.retired.Store(true)
		dropped := len(prev.queue)
		prev.term, prev.queue, prev.next, prev.scheduled = nil, nil, time.Time{}, nil
		prev.mu.Unlock()
		newlyRemoved = append(newlyRemoved, prev)
		if dropped > 0 {
			h.log.Warn("job removed: its queued ticks are dropped", "job", prev.Name, "queued", dropped)
		}
	}
	var still []*jobState // removed earlier, not added back
	for _, j := range h.removed {
		if removed[j.Name] == j {
			still = append(still, j)
		}
	}
	h.removed = append(still, newlyRemoved...)
	h.pruneRemoved()
	h.jobs = next
	if t != nil {
		t.pending = append(t.pending, next...)
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	attrs := []any{"jobs", len(next), "added", ch.Added, "removed", ch.Removed, "changed", ch.Changed, "unchanged", len(ch.Unchanged)}
	if t != nil {
		attrs = append(attrs, "token", t.token)
	}
	h.log.Info("job set replaced", attrs...)
	return ch, nil
}

// sameSettings reports whether a and b differ in nothing but Run.
func sameSettings(a, b Job) bool {
	a.Run, b.Run = nil, nil
	return reflect.DeepEqual(a, b)
}

// pruneRemoved drops from h.removed the jobs with no run going, and
// returns a copy of the rest. h.mu is held.
func (h *Host) pruneRemoved() []*jobState {
	keep := h.removed[:0]
	for _, j := range h.removed {
		j.mu.Lock()
		active := j.active
		j.mu.Unlock()
		if active > 0 {
			keep = append(keep, j)
		}
	}
	clear(h.removed[len(keep):])
	h.removed = keep
	return slices.Clone(keep)
}
