package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// The operators' controls over HTTP (Config.Control): pause, resume and
// run now, for any instance to accept, since each only writes the
// backend; the instance registry each node publishes; and the record of
// terms (which the Host writes: schedulerhost.Host.Lead). The library
// calls behind them are control.Jobs's.

// DefaultInstanceInterval is Config.InstanceInterval when zero.
const DefaultInstanceInterval = 5 * time.Second

// The registry: an instance publishing every interval sets its entry to
// expire after liveIntervals of them; an entry that expired staleAfter
// ago is no longer listed in /status, and the leader removes it.
const (
	liveIntervals = 3
	staleAfter    = time.Minute
)

// StatusInstance is one instance of the election, as /status lists it.
type StatusInstance struct {
	control.Instance
	Live       bool `json:"live"`        // its entry has not expired (Instance.Expires), by this node's clock
	Leader     bool `json:"leader"`      // it leads, as far as this node can tell
	JobsDiffer bool `json:"jobs_differ"` // its job set's hash differs from the leader's
}

// controlErr writes a JSON error.
func controlErr(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf(format, args...)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// jobs returns the control store's typed view, or writes 501 and nil.
func (s *server) jobs(w http.ResponseWriter) *control.Jobs {
	if s.api.cfg.Control == nil {
		controlErr(w, http.StatusNotImplemented, "this node has no control store: its backend keeps no pauses or run-now requests")
		return nil
	}
	return control.NewJobs(s.api.cfg.Control)
}

// knownJob reports whether job is in this node's job set, else writes 404.
func (s *server) knownJob(w http.ResponseWriter, job string) bool {
	for _, js := range s.api.cfg.Host.Status() {
		if js.Name == job {
			return true
		}
	}
	controlErr(w, http.StatusNotFound, "job %q: not in the job set of %s", job, s.api.cfg.Elector.Identity().ID)
	return false
}

// by is who asks: the by parameter, else "admin".
func by(r *http.Request) string {
	if b := strings.TrimSpace(r.FormValue("by")); b != "" {
		return b
	}
	return "admin"
}

// handlePause: POST /jobs/{job}/pause[?note=...&by=...].
func (s *server) handlePause(w http.ResponseWriter, r *http.Request) {
	jobs, job := s.jobs(w), r.PathValue("job")
	if jobs == nil || !s.knownJob(w, job) {
		return
	}
	p := control.Pause{Job: job, By: by(r), At: time.Now().UTC(), Note: r.FormValue("note")}
	if err := jobs.Pause(r.Context(), p); err != nil {
		controlErr(w, http.StatusServiceUnavailable, "pause %s: %v", job, err)
		return
	}
	s.api.cfg.Logger.Info("job paused", "job", job, "by", p.By, "note", p.Note, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, p)
}

// resumeReply is the answer of POST /jobs/{job}/resume.
type resumeReply struct {
	Resumed control.Pause       `json:"resumed"`       // the pause that ended
	Run     *control.RunRequest `json:"run,omitempty"` // with run_missed=1, the run now of the skipped ticks
}

// handleResume: POST /jobs/{job}/resume[?run_missed=1&by=...]. The ticks
// skipped while paused are not replayed; with run_missed=1, if the
// history shows one skipped since the pause, the job is run once now.
func (s *server) handleResume(w http.ResponseWriter, r *http.Request) {
	jobs, job := s.jobs(w), r.PathValue("job")
	if jobs == nil || !s.knownJob(w, job) {
		return
	}
	runMissed := false
	if v := r.FormValue("run_missed"); v != "" {
		switch v {
		case "1", "true":
			runMissed = true
		case "0", "false":
		default:
			controlErr(w, http.StatusBadRequest, "run_missed %q: want 1 or 0", v)
			return
		}
	}
	p, err := jobs.Resume(r.Context(), job)
	switch {
	case errors.Is(err, control.ErrNotPaused):
		controlErr(w, http.StatusConflict, "job %q is not paused", job)
		return
	case err != nil:
		controlErr(w, http.StatusServiceUnavailable, "resume %s: %v", job, err)
		return
	}
	rep := resumeReply{Resumed: p}
	a := s.api
	a.cfg.Logger.Info("job resumed", "job", job, "by", by(r), "paused_by", p.By, "remote", r.RemoteAddr)
	if runMissed {
		hist, err := a.cfg.Host.History(r.Context(), job, maxStatusHistory)
		if err != nil {
			controlErr(w, http.StatusServiceUnavailable, "resumed %s, but reading its history for run_missed failed: %v", job, err)
			return
		}
		for _, h := range hist {
			if h.Result == ledger.ResultSkipped && !h.Tick.Before(p.At.Truncate(time.Second)) {
				req, _, err := jobs.RequestRun(r.Context(), control.RunRequest{ID: fmt.Sprintf("resume-%d", p.Version), Job: job,
					By: by(r), At: time.Now().UTC(), Via: a.cfg.Elector.Identity().ID})
				if err != nil {
					controlErr(w, http.StatusServiceUnavailable, "resumed %s, but requesting the run of its missed ticks failed: %v", job, err)
					return
				}
				rep.Run = &req
				break
			}
		}
	}
	writeJSON(w, http.StatusOK, rep)
}

// handleRunNow: POST /jobs/{job}/run, the request id in the
// Idempotency-Key header or the request_id parameter (made up if absent).
// 202 with the request when made, 200 with the stored one when the id
// existed, 409 if it is another job's.
func (s *server) handleRunNow(w http.ResponseWriter, r *http.Request) {
	jobs, job := s.jobs(w), r.PathValue("job")
	if jobs == nil || !s.knownJob(w, job) {
		return
	}
	id := r.Header.Get("Idempotency-Key")
	if id == "" {
		id = r.FormValue("request_id")
	}
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	if err := control.CheckRequestID(id); err != nil {
		controlErr(w, http.StatusBadRequest, "%v", err)
		return
	}
	a := s.api
	req, made, err := jobs.RequestRun(r.Context(), control.RunRequest{ID: id, Job: job, By: by(r), At: time.Now().UTC(), Via: a.cfg.Elector.Identity().ID})
	switch {
	case errors.Is(err, control.ErrRequestConflict):
		controlErr(w, http.StatusConflict, "request id %s is taken by a request of job %q", id, req.Job)
		return
	case err != nil:
		controlErr(w, http.StatusServiceUnavailable, "run %s now: %v", job, err)
		return
	}
	code := http.StatusOK
	if made {
		code = http.StatusAccepted
		a.cfg.Logger.Info("run now requested", "job", job, "request", id, "by", req.By, "remote", r.RemoteAddr)
	}
	writeJSON(w, code, runNowReply{RunRequest: req, IDKeptFor: schedulerhost.RunNowKeptFor.String(), IDKeptPerJob: schedulerhost.RunNowKeptPerJob})
}

// runNowReply is the answer to a run now: the request, and how long its
// id makes a repeated request idempotent (schedulerhost.RunNowKeptFor
// after the run's end, among the job's RunNowKeptPerJob newest done
// requests). After that, the same id runs the job again.
type runNowReply struct {
	control.RunRequest
	IDKeptFor    string `json:"id_kept_for"`
	IDKeptPerJob int    `json:"id_kept_per_job"`
}

// handleRun: GET /runs/{id}, a run-now request and its outcome.
func (s *server) handleRun(w http.ResponseWriter, r *http.Request) {
	jobs, id := s.jobs(w), r.PathValue("id")
	if jobs == nil {
		return
	}
	if err := control.CheckRequestID(id); err != nil {
		controlErr(w, http.StatusBadRequest, "%v", err)
		return
	}
	req, ok, err := jobs.Request(r.Context(), id)
	switch {
	case err != nil:
		controlErr(w, http.StatusServiceUnavailable, "request %s: %v", id, err)
	case !ok:
		controlErr(w, http.StatusNotFound, "request %s: none", id)
	default:
		writeJSON(w, http.StatusOK, req)
	}
}

// Publish keeps this instance's entry in the registry of instances
// (Config.Control) until ctx ends, then removes it, and returns: each
// entry expires liveIntervals publishing intervals (InstanceInterval)
// after it was written. The leader also removes entries that expired
// staleAfter ago: those of instances that crashed or were cut off. It
// blocks; the runner (package baton's Run) runs it on a goroutine of its
// own while it runs the Elector. Without a Control store it only waits
// for ctx to end.
func (a *API) Publish(ctx context.Context) {
	if a.cfg.Control == nil {
		<-ctx.Done()
		return
	}
	jobs := control.NewJobs(a.cfg.Control)
	el := a.cfg.Elector
	started := time.Now().UTC()
	tk := time.NewTicker(a.cfg.InstanceInterval)
	defer tk.Stop()
	for {
		a.mu.Lock()
		hash := a.jobsHash
		a.mu.Unlock()
		seen := time.Now().UTC()
		in := control.Instance{ID: el.Identity().ID, Eligible: el.Eligible() && el.Held() == "", Version: a.cfg.Version, JobsHash: hash,
			Address: a.cfg.Address, Started: started, Seen: seen, Expires: seen.Add(liveIntervals * a.cfg.InstanceInterval)}
		pctx, cancel := context.WithTimeout(ctx, a.cfg.InstanceInterval)
		if err := jobs.Publish(pctx, in); err != nil && ctx.Err() == nil {
			a.cfg.Logger.Debug("publishing this instance failed", "err", err)
		}
		if el.IsLeader() {
			if k, err := jobs.StaleInstances(pctx, time.Now().Add(-staleAfter)); err == nil && k > 0 {
				a.cfg.Logger.Info("removed instances whose registry entry expired", "count", k, "after", staleAfter)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := jobs.Unpublish(uctx, in.ID); err != nil {
				a.cfg.Logger.Debug("removing this instance from the registry failed", "err", err)
			}
			cancel()
			return
		case <-tk.C:
		}
	}
}

// controlStatus adds the pauses, the instances and the terms to d, each
// read once, within ctx.
func (a *API) controlStatus(ctx context.Context, d *Status) {
	jobs := control.NewJobs(a.cfg.Control)
	var errs []string
	if ps, err := jobs.Pauses(ctx); err != nil {
		errs = append(errs, "pauses: "+err.Error())
	} else {
		for i := range d.Jobs {
			if p, ok := ps[d.Jobs[i].Name]; ok {
				d.Jobs[i].Paused = &p
			}
		}
	}
	if ins, err := jobs.Instances(ctx); err != nil {
		errs = append(errs, "instances: "+err.Error())
	} else {
		leaderHash := ""
		for _, in := range ins {
			if d.Leader != nil && in.ID == d.Leader.Identity.ID {
				leaderHash = in.JobsHash
			}
		}
		dflt := liveIntervals * a.cfg.InstanceInterval // for entries without Expires
		for _, in := range ins {
			if in.Lapsed(d.Now.Add(-staleAfter), dflt) {
				continue // gone long ago; the leader removes it
			}
			si := StatusInstance{Instance: in, Live: !in.Lapsed(d.Now, dflt),
				Leader: d.Leader != nil && in.ID == d.Leader.Identity.ID}
			si.JobsDiffer = leaderHash != "" && in.JobsHash != leaderHash
			d.Instances = append(d.Instances, si)
		}
	}
	if ts, err := jobs.Terms(ctx); err != nil {
		errs = append(errs, "terms: "+err.Error())
	} else {
		d.Terms = ts
	}
	d.ControlErr = strings.Join(errs, "; ")
}
