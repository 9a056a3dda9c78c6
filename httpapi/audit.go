package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/schedulerhost"
)

// The tick accounting (package audit) as the API serves it: GET /audit,
// and each job's line on the status page (/status?audit=1).
const (
	// DefaultAuditWindow is the window of GET /audit without ?window=,
	// and the status page's.
	DefaultAuditWindow = 24 * time.Hour
	// MaxAuditWindow bounds ?window=: a report walks every due tick of
	// its window (an every-second job's month is 2.6 million ticks).
	MaxAuditWindow = 31 * 24 * time.Hour
	// AuditTimeout bounds GET /audit's reads of the backend.
	AuditTimeout = 10 * time.Second
	// PageAuditTimeout bounds the status page's reads of the accounting,
	// and PageAuditTTL is how long their result (or error) is served
	// again: the page refreshes every second, the backend is read at
	// most once per PageAuditTTL however many pages are open.
	PageAuditTimeout = 2 * time.Second
	PageAuditTTL     = 5 * time.Second
)

// AuditReply is the JSON of GET /audit.
type AuditReply struct {
	Reports []audit.Report `json:"reports"`
}

// handleAudit: GET /audit[?job=NAME][&window=24h], the accounting of
// each due tick of the window ending now, of every job or of one.
func (s *server) handleAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	window := DefaultAuditWindow
	if v := q.Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > MaxAuditWindow {
			controlErr(w, http.StatusBadRequest, "window %q: want a duration above 0 and at most %v, such as 24h", v, MaxAuditWindow)
			return
		}
		window = d
	}
	job := q.Get("job")
	if q.Has("job") && !s.api.hasJob(job) {
		controlErr(w, http.StatusBadRequest, "job %q: not in this node's job set", job)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), AuditTimeout)
	defer cancel()
	to := time.Now()
	reps, err := s.api.cfg.Host.Audit(ctx, job, to.Add(-window), to)
	switch {
	case errors.Is(err, schedulerhost.ErrNoAccounting):
		controlErr(w, http.StatusNotImplemented, "this node has no control store, where the tick accounting lives: %v", err)
	case err != nil:
		controlErr(w, http.StatusServiceUnavailable, "accounting unavailable: %v", err)
	default:
		writeJSON(w, http.StatusOK, AuditReply{Reports: reps})
	}
}

// hasJob reports whether job is in the Host's job set now.
func (a *API) hasJob(job string) bool {
	return slices.ContainsFunc(a.cfg.Host.Status(), func(j schedulerhost.JobStatus) bool { return j.Name == job })
}

// pageAudit is the status page's accounting: the last
// DefaultAuditWindow of every job, read at most once per PageAuditTTL.
type pageAudit struct {
	mu   sync.Mutex // held while reading: one read at a time
	at   time.Time  // when reps and err were read
	reps []audit.Report
	err  error
}

// addAudit adds to d each job's accounting of the last
// DefaultAuditWindow, or the reason it cannot (AuditErr). It blocks for
// at most PageAuditTimeout, not at all within PageAuditTTL of the last
// read; ctx's cancellation does not cut the read short (its result is
// kept for the next page).
func (a *API) addAudit(ctx context.Context, d *Status) {
	p := &a.pageAudit
	p.mu.Lock()
	if now := time.Now(); p.at.IsZero() || now.Sub(p.at) >= PageAuditTTL || now.Before(p.at) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PageAuditTimeout)
		p.reps, p.err = a.cfg.Host.Audit(rctx, "", now.Add(-DefaultAuditWindow), now)
		cancel()
		p.at = time.Now()
	}
	reps, err, at := p.reps, p.err, p.at
	p.mu.Unlock()
	d.AuditWindow = DefaultAuditWindow.String()
	if err != nil {
		d.AuditErr = err.Error()
		return
	}
	byJob := make(map[string]*audit.Report, len(reps))
	for i := range reps {
		byJob[reps[i].Job] = &reps[i]
	}
	for i := range d.Jobs {
		if r, ok := byJob[d.Jobs[i].Name]; ok {
			d.Jobs[i].Audit = r
		} else {
			d.Jobs[i].AuditErr = fmt.Sprintf("not in the accounting read at %s (added since?)", at.UTC().Format(time.RFC3339))
		}
	}
}
