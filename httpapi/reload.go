package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"

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
func (n *Node) Reload() (ReloadSummary, error) {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	log, r := n.cfg.Logger, n.cfg.Reloader
	if r == nil {
		return ReloadSummary{}, errNoReloader
	}
	sum, err := r.Reload(n.cfg.Host)
	if err != nil {
		log.Error("reload refused: the jobs file has errors; the old job set keeps running", "file", r.Source(), "err", err)
		return ReloadSummary{}, err
	}
	if ti, ok := n.cfg.Elector.Term(); ok {
		sum.Token = ti.Token
	}
	n.mu.Lock()
	n.jobsHash = sum.JobsHash
	n.mu.Unlock()
	log.Info("jobs reloaded", "file", r.Source(), "jobs", len(sum.Added)+len(sum.Changed)+len(sum.Unchanged), "added", sum.Added, "removed", sum.Removed,
		"changed", sum.Changed, "unchanged", len(sum.Unchanged), "jobs_hash", sum.JobsHash, "leading", sum.Token != 0, "token", sum.Token)
	return sum, nil
}

// ReloadOnSignal calls Reload at each of sigs (SIGHUP, say) until ctx ends
// or stop is called; stop waits for the goroutine that watches them.
// Binaries running a node call it once (demo node does, with SIGHUP); a
// service embedding a node may prefer its own trigger.
func (n *Node) ReloadOnSignal(ctx context.Context, sigs ...os.Signal) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-ch:
				n.cfg.Logger.Info("reloading the jobs file", "signal", s.String())
				_, _ = n.Reload() // logged
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		cancel()
		<-done
	}
}

// handleReload: POST /reload. 200 with a ReloadSummary; 400 with the
// file's errors, one per line, when it is refused (the old set keeps
// running); 409 on a node without a Reloader.
func (s *server) handleReload(w http.ResponseWriter, r *http.Request) {
	n := s.node
	n.cfg.Logger.Info("reload requested", "remote", r.RemoteAddr)
	sum, err := n.Reload()
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
