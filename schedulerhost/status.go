package schedulerhost

import (
	"context"
	"time"

	"github.com/batonhq/baton/ledger"
)

// JobStatus describes one job for status pages.
type JobStatus struct {
	Name     string       `json:"name"`
	Schedule string       `json:"schedule"`
	Overlap  Overlap      `json:"overlap"`
	Misfire  Misfire      `json:"misfire"`
	Next     time.Time    `json:"next,omitzero"` // next tick: the scheduled one while leading, else what the schedule says
	Running  int          `json:"running"`       // runs going in this process, including any an earlier term abandoned
	Skipped  int64        `json:"skipped"`       // ticks skipped by the overlap policy since start
	LastRun  *ledger.Run  `json:"last_run,omitempty"`
	Recent   []ledger.Run `json:"recent,omitempty"` // newest first, runs of this instance
}

// Status describes every job. It does not block on I/O.
func (h *Host) Status() []JobStatus {
	now := h.wallNow().In(h.cfg.Location)
	out := make([]JobStatus, 0, len(h.jobs))
	for _, j := range h.jobs {
		j.mu.Lock()
		s := JobStatus{Name: j.Name, Schedule: j.Schedule, Overlap: j.Overlap, Misfire: j.Misfire,
			Next: j.next, Running: j.active, Skipped: j.skipped}
		if s.Next.IsZero() {
			s.Next = j.sched.Next(now)
		}
		if len(j.recent) > 0 {
			s.Recent = j.recentNewestFirst(recentRuns, h.cfg.Instance)
		}
		j.mu.Unlock()
		if len(s.Recent) > 0 {
			r := s.Recent[0]
			s.LastRun = &r
		}
		out = append(out, s)
	}
	return out
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
// the ledger (every instance's runs) or, without one, from this instance's
// memory.
func (h *Host) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	if h.cfg.Ledger != nil {
		return h.cfg.Ledger.History(ctx, job, n)
	}
	var out []ledger.Run
	for _, j := range h.jobs {
		if j.Name != job {
			continue
		}
		j.mu.Lock()
		out = append(out, j.recentNewestFirst(n, h.cfg.Instance)...)
		j.mu.Unlock()
	}
	return out, nil
}
