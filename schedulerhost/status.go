package schedulerhost

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// JobStatus describes one job for status pages.
type JobStatus struct {
	Name     string       `json:"name"`
	Schedule string       `json:"schedule"`
	Overlap  Overlap      `json:"overlap"`
	Misfire  Misfire      `json:"misfire"`
	Next     time.Time    `json:"next,omitzero"`     // next tick: the scheduled one while leading, else what the schedule says
	Running  int          `json:"running"`           // runs going in this process, including any an earlier term abandoned
	Skipped  int64        `json:"skipped"`           // ticks skipped by the overlap policy since start
	Removed  bool         `json:"removed,omitempty"` // no longer in the job set (SetJobs); listed while a run of it goes
	LastRun  *ledger.Run  `json:"last_run,omitempty"`
	Recent   []ledger.Run `json:"recent,omitempty"` // newest first, runs of this instance
}

// Status describes every job of the set, in its order, then each job
// SetJobs removed while a run of it is still going (Removed, with no
// Next), until that run returns. It does not block on I/O.
func (h *Host) Status() []JobStatus {
	now := h.wallNow().In(h.cfg.Location)
	h.mu.Lock()
	jobs, removed := h.jobs, h.pruneRemoved()
	h.mu.Unlock()
	out := make([]JobStatus, 0, len(jobs)+len(removed))
	for _, j := range jobs {
		out = append(out, j.status(now, h.cfg.Instance, false))
	}
	for _, j := range removed {
		out = append(out, j.status(now, h.cfg.Instance, true))
	}
	return out
}

func (j *jobState) status(now time.Time, instance string, removed bool) JobStatus {
	j.mu.Lock()
	s := JobStatus{Name: j.Name, Schedule: j.Schedule, Overlap: j.Overlap, Misfire: j.Misfire,
		Next: j.next, Running: j.active, Skipped: j.skipped, Removed: removed}
	if removed {
		s.Next = time.Time{}
	} else if s.Next.IsZero() {
		s.Next = j.sched.Next(now)
	}
	if len(j.recent) > 0 {
		s.Recent = j.recentNewestFirst(recentRuns, instance)
	}
	j.mu.Unlock()
	if len(s.Recent) > 0 {
		r := s.Recent[0]
		s.LastRun = &r
	}
	return s
}

// Leading reports whether Lead is running.
func (h *Host) Leading() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leading
}

// Ledger returns the configured ledger, or nil.
func (h *Host) Ledger() ledger.Ledger { return h.cfg.Ledger }

// History returns up to n of job's most recent runs, newest first, from
// the ledger (every instance's runs, with the ticks whose claims were
// refused and an ended term's runs still "running" shown as present.go
// says; with a Control store, merged with the job's run-now runs, by
// start) or, without one, from this instance's memory.
func (h *Host) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	if h.cfg.Ledger != nil {
		runs, err := h.cfg.Ledger.History(ctx, job, n)
		if err == nil {
			runs = h.present(job, runs, n) // present.go
		}
		if err != nil || h.cfg.Control == nil {
			return runs, err
		}
		reqs, err := control.NewJobs(h.cfg.Control).Requests(ctx)
		if err != nil {
			return runs, fmt.Errorf("run-now requests: %w", err)
		}
		return mergeManual(runs, reqs, job, n), nil
	}
	h.mu.Lock()
	jobs, removed := h.jobs, h.pruneRemoved()
	h.mu.Unlock()
	var out []ledger.Run
	for _, j := range append(slices.Clip(jobs), removed...) {
		if j.Name != job {
			continue
		}
		j.mu.Lock()
		out = append(out, j.recentNewestFirst(n, h.cfg.Instance)...)
		j.mu.Unlock()
	}
	return out, nil
}
