package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// nodeState is what the HTTP server reports about one `demo node`.
type nodeState struct {
	identity election.Identity
	election string
	backend  string // etcd, postgres, mysql, consul
	where    string // the prefix, key or table an operator can look at
	elector  *election.Elector
	host     *schedulerhost.Host

	loopAlive atomic.Bool // the elector's Run is going
	stopping  atomic.Bool // a shutdown has begun
}

// health is the verdict of /healthz: unhealthy while the election loop is
// not running, or while runs are still going although this instance no
// longer leads (they may overlap with the new leader's).
func (n *nodeState) health() (ok bool, reason string) {
	if !n.loopAlive.Load() {
		return false, "election loop not running"
	}
	if r := n.host.Abandoned(); r > 0 {
		return false, fmt.Sprintf("%d runs of an ended term still going", r)
	}
	if r := n.host.Running(); r > 0 && !n.elector.IsLeader() {
		return false, fmt.Sprintf("%d runs still going without leadership", r)
	}
	return true, "ok"
}

// ready is the verdict of /readyz: the election loop runs and no shutdown
// has begun.
func (n *nodeState) ready() (ok bool, reason string) {
	if n.stopping.Load() {
		return false, "shutting down"
	}
	if !n.loopAlive.Load() {
		return false, "election loop not running"
	}
	return true, "ok"
}

// server is the node's HTTP interface. Handlers are registered in routes;
// add new endpoints (metrics, an HTML page, step-down) there.
type server struct {
	node *nodeState
	mux  *http.ServeMux
}

func newServer(n *nodeState) *server {
	s := &server{node: n, mux: http.NewServeMux()}
	s.routes()
	return s
}

func (s *server) routes() {
	s.mux.HandleFunc("GET /healthz", s.handleHealthz)
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	s.mux.HandleFunc("GET /status", s.handleStatus)
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// serve serves on ln until stop is closed (then shuts down gracefully) or
// serving fails. It blocks.
func (s *server) serve(ln net.Listener, stop <-chan struct{}) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-stop:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(ctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("http: shutdown: %w", err)
	}
	return nil
}

func plain(w http.ResponseWriter, ok bool, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, reason)
}

func (s *server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	ok, reason := s.node.health()
	plain(w, ok, reason)
}

func (s *server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ok, reason := s.node.ready()
	plain(w, ok, reason)
}

// statusDoc is the JSON of /status.
type statusDoc struct {
	Identity  election.Identity         `json:"identity"`
	Election  string                    `json:"election"`
	Backend   string                    `json:"backend"`
	Where     string                    `json:"where"`
	Leading   bool                      `json:"leading"`
	Term      *termDoc                  `json:"term,omitempty"` // this node's term, when leading
	Leader    *election.LeaderInfo      `json:"leader"`         // who leads, as far as this node can tell; null if nobody
	LeaderErr string                    `json:"leader_error,omitempty"`
	Running   int                       `json:"running"` // runs in flight, across terms
	Healthy   bool                      `json:"healthy"`
	Ready     bool                      `json:"ready"`
	Jobs      []schedulerhost.JobStatus `json:"jobs"`
}

type termDoc struct {
	Token uint64    `json:"token"`
	Since time.Time `json:"since"`
}

func (s *server) status(ctx context.Context) statusDoc {
	n := s.node
	d := statusDoc{Identity: n.identity, Election: n.election, Backend: n.backend, Where: n.where,
		Running: n.host.Running(), Jobs: n.host.Status()}
	if ti, ok := n.elector.Term(); ok {
		d.Leading = true
		d.Term = &termDoc{Token: ti.Token, Since: ti.Since}
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if li, err := n.elector.Leader(lctx); err == nil {
		d.Leader = &li
	} else if !errors.Is(err, election.ErrNoLeader) {
		d.LeaderErr = err.Error()
	}
	d.Healthy, _ = n.health()
	d.Ready, _ = n.ready()
	return d
}

func (s *server) handleStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.status(r.Context()))
}
