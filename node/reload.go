package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"

	"github.com/batonhq/baton/internal/jobsfile"
)

// Reload: the jobs file read again while the node runs (SIGHUP,
// POST /reload), and the job set handed to the Host (Host.SetJobs) in the
// same term: the lease is not given up.

// errNoJobsFile answers a reload of a node made without Config.JobsFile.
var errNoJobsFile = errors.New("node: no jobs file to reload (Config.JobsFile is nil)")

// ReloadSummary is the answer of Reload and POST /reload: the jobs of the
// file added, removed, changed (any field of the entry: schedule, command,
// settings) and unchanged, by name; the new set's hash; the token of the
// term that goes on with it, if the node leads.
type ReloadSummary struct {
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Changed   []string `json:"changed"`
	Unchanged []string `json:"unchanged"`
	JobsHash  string   `json:"jobs_hash"`
	Token     uint64   `json:"token,omitempty"`
}

// Reload reads the jobs file again and gives its jobs to the Host
// (schedulerhost.Host.SetJobs): added jobs start from their next tick,
// removed ones drain, changed ones take their new settings from their next
// tick, and a term in progress goes on with the same token. A bad file is
// refused as a whole: the error names FILE:LINE: FIELD for each problem,
// it is logged at Error, and the old set keeps running. The election
// section is read only at start: a change there is logged and ignored.
// Reloads are serialized; any goroutine may call Reload.
func (n *Node) Reload() (ReloadSummary, error) {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	log := n.cfg.Logger
	n.mu.Lock()
	cur := n.jobs
	n.mu.Unlock()
	if cur == nil {
		return ReloadSummary{}, errNoJobsFile
	}
	read := n.cfg.ReadJobs
	if read == nil {
		read = func() (*jobsfile.File, error) { return jobsfile.Load(cur.Path) }
	}
	f, err := read()
	if err == nil {
		grace := ShutdownConfigOf(n.cfg.JobsFile).withDefaults().KillGrace // the Host's KillGrace was set from it
		jobs, jerr := hostJobs(f, n.cfg.Election, n.cfg.Elector.Identity().ID, grace, log)
		if jerr != nil {
			err = jerr
		} else if _, serr := n.cfg.Host.SetJobs(jobs); serr != nil {
			err = f.Locate(serr)
		}
	}
	if err != nil {
		log.Error("reload refused: the jobs file has errors; the old job set keeps running", "file", cur.Path, "err", err)
		return ReloadSummary{}, err
	}
	sum := ReloadSummary{JobsHash: f.JobsHash()}
	old := make(map[string]jobsfile.Job, len(cur.Jobs))
	for _, j := range cur.Jobs {
		old[j.Name] = j
	}
	for _, j := range f.Jobs {
		o, ok := old[j.Name]
		delete(old, j.Name)
		switch {
		case !ok:
			sum.Added = append(sum.Added, j.Name)
		case jobsfile.SameJob(o, j):
			sum.Unchanged = append(sum.Unchanged, j.Name)
		default:
			sum.Changed = append(sum.Changed, j.Name)
		}
	}
	for _, j := range cur.Jobs {
		if _, ok := old[j.Name]; ok {
			sum.Removed = append(sum.Removed, j.Name)
		}
	}
	if ti, ok := n.cfg.Elector.Term(); ok {
		sum.Token = ti.Token
	}
	n.mu.Lock()
	n.jobs, n.jobsHash = f, sum.JobsHash
	n.mu.Unlock()
	if f.Election != n.cfg.JobsFile.Election {
		log.Warn("reload: the election section changed; it is read only at start (restart the node to apply it)", "file", f.Path)
	}
	if !appCheckSame(n.cfg.JobsFile, f) {
		log.Warn("reload: the application check (app section, or the http jobs' endpoints it connects to) changed; it is read only at start (restart the node to apply it)", "file", f.Path)
	}
	if !slices.EqualFunc(f.Settings, n.cfg.JobsFile.Settings, func(a, b jobsfile.Setting) bool {
		return a.Section == b.Section && a.Key == b.Key && a.Value == b.Value
	}) {
		log.Warn("reload: the backend or node settings (or election.name) changed; they are read only at start (restart the node to apply them)", "file", f.Path)
	}
	log.Info("jobs reloaded", "file", f.Path, "jobs", len(f.Jobs), "added", sum.Added, "removed", sum.Removed,
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
// running); 409 on a node without a jobs file.
func (s *server) handleReload(w http.ResponseWriter, r *http.Request) {
	n := s.node
	n.cfg.Logger.Info("reload requested", "remote", r.RemoteAddr)
	sum, err := n.Reload()
	switch {
	case errors.Is(err, errNoJobsFile):
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

// appCheckSame reports whether old and f ask for the same application
// check.
func appCheckSame(old, f *jobsfile.File) bool {
	a, b := old.App, f.App
	a.Line, b.Line = 0, 0
	c1, u1, s1 := old.AppCheck()
	c2, u2, s2 := f.AppCheck()
	return a == b && c1 == c2 && u1 == u2 && slices.Equal(s1, s2)
}
