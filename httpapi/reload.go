package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/batonhq/baton/schedulerhost"
)

// Reload: the job set read again while the node runs (SIGHUP,
// POST /reload), and handed to the Host (Host.SetJobs) in the same term:
// the lease is not given up.

// errNoReloader answers a reload of a node made without Config.Reloader.
var errNoReloader = errors.New("httpapi: no job set to reload (Config.Reloader is nil)")

// ReloadSummary is the answer of Reload and POST /reload: the jobs
// added, removed, changed (any field: schedule, command, settings) and
// unchanged, by name; the new set's hash; the token of the term that goes
// on with it, if the node leads.
type ReloadSummary struct {
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Changed   []string `json:"changed"`
	Unchanged []string `json:"unchanged"`
	JobsHash  string   `json:"jobs_hash"`
	Token     uint64   `json:"token,omitempty"`
}

// A Reloader reads a node's job set again, from wherever it came from (a
// jobs file, for the baton command).
type Reloader interface {
	// Source names where the set is read from, for the logs.
	Source() string
	// Reload reads the set again and gives its jobs to host
	// (Host.SetJobs). It returns what changed, Token aside; on an error
	// the set it read is refused as a whole and the old one keeps
	// running.
	Reload(host *schedulerhost.Host) (ReloadSummary, error)
}

// Reload reads the job set again through Config.Reloader and gives it to
// the Host (schedulerhost.Host.SetJobs): added jobs start from their next
// tick, removed ones drain, changed ones take their new settings from
// their next tick, and a term in progress goes on with the same token. A
// refused set is logged at Error with its error, and the old set keeps
// running. Reloads are serialized; any goroutine may call Reload.
func (a *API) Reload() (ReloadSummary, error) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	log, r := a.cfg.Logger, a.cfg.Reloader
	if r == nil {
		return ReloadSummary{}, errNoReloader
	}
	sum, err := r.Reload(a.cfg.Host)
	if err != nil {
		log.Error("reload refused: the jobs file has errors; the old job set keeps running", "file", r.Source(), "err", err)
		return ReloadSummary{}, err
	}
	if ti, ok := a.cfg.Elector.Term(); ok {
		sum.Token = ti.Token
	}
	a.mu.Lock()
	a.jobsHash = sum.JobsHash
	a.mu.Unlock()
	log.Info("jobs reloaded", "file", r.Source(), "jobs", len(sum.Added)+len(sum.Changed)+len(sum.Unchanged), "added", sum.Added, "removed", sum.Removed,
		"changed", sum.Changed, "unchanged", len(sum.Unchanged), "jobs_hash", sum.JobsHash, "leading", sum.Token != 0, "token", sum.Token)
	return sum, nil
}

// ReloadOn calls Reload at each signal received on sigs until ctx ends,
// then returns. It blocks; the runner (package baton's Run) runs it on a
// goroutine of its own with a channel it registered with signal.Notify
// for Advanced.ReloadSignals (the baton command's SIGHUP). A service
// embedding an API may prefer its own trigger and call Reload.
func (a *API) ReloadOn(ctx context.Context, sigs <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-sigs:
			a.cfg.Logger.Info("reloading the jobs file", "signal", s.String())
			_, _ = a.Reload() // logged
		}
	}
}

// handleReload: POST /reload. 200 with a ReloadSummary; 400 with the
// file's errors, one per line, when it is refused (the old set keeps
// running); 409 on a node without a Reloader.
func (s *server) handleReload(w http.ResponseWriter, r *http.Request) {
	a := s.api
	a.cfg.Logger.Info("reload requested", "remote", r.RemoteAddr)
	sum, err := a.Reload()
	switch {
	case errors.Is(err, errNoReloader):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case err != nil:
		http.Error(w, fmt.Sprintf("reload refused; the old job set keeps running:\n%v", err), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(sum)
}
