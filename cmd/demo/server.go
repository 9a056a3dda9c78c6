package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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

	registry         *prometheus.Registry // served on /metrics; nil: an empty one
	adminToken       []byte               // bearer token of the admin endpoints; nil: they are disabled
	stepDownCooldown time.Duration        // default cooldown of POST /step-down
	log              *slog.Logger         // nil: slog.Default()

	loopAlive atomic.Bool // the elector's Run is going
	stopping  atomic.Bool // a shutdown has begun

	mu           sync.Mutex
	cooldown     time.Time // no campaign before this instant (last step-down)
	stepDownTerm uint64    // token of the term a step-down was asked of
	seenToken    uint64    // the leader's token when /status last looked
	seenAt       time.Time // when /status first saw seenToken
}

func (n *nodeState) logger() *slog.Logger {
	if n.log == nil {
		return slog.Default()
	}
	return n.log
}

// stepDown asks the elector to step down with cooldown and remembers the
// cooldown's end for /status. It reports whether a term was held, and its
// token.
func (n *nodeState) stepDown(cooldown time.Duration) (leading bool, token uint64, until time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ti, held := n.elector.Term()
	now := time.Now()
	until = now.Add(cooldown)
	prev := n.cooldown
	leading = n.elector.StepDown(cooldown)
	n.cooldown = until
	if !leading && now.Before(prev) && until.Before(prev) && n.elector.Eligible() {
		// The elector waits out the cooldown it had; wake it (it is not
		// campaigning while it cools down) so the shorter one applies now.
		n.elector.SetEligible(false)
		n.elector.SetEligible(true)
	}
	if held && leading {
		n.stepDownTerm = ti.Token
		token = ti.Token
	}
	return leading, token, until
}

// leaderSeen returns when this node first reported the term with token
// (for backends that do not tell since when a leader leads).
func (n *nodeState) leaderSeen(token uint64) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seenToken != token || n.seenAt.IsZero() {
		n.seenToken, n.seenAt = token, time.Now()
	}
	return n.seenAt
}

// cooldownUntil returns the end of the step-down cooldown, or zero when it
// is over.
func (n *nodeState) cooldownUntil() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if time.Until(n.cooldown) <= 0 {
		return time.Time{}
	}
	return n.cooldown
}

// steppingDown reports whether the term with token is draining after a
// step-down request.
func (n *nodeState) steppingDown(token uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stepDownTerm != 0 && n.stepDownTerm == token
}

// role is this node's part in one word or two, for people.
func (n *nodeState) role(leading, steppingDown bool) string {
	switch {
	case n.stopping.Load() && leading:
		return "leader, stopping"
	case steppingDown:
		return "leader, stepping down"
	case leading:
		return "leader"
	case n.stopping.Load():
		return "stopping"
	case !n.elector.Eligible():
		return "standby"
	case !n.cooldownUntil().IsZero():
		return "cooling down"
	}
	return "follower"
}

// newRegistry returns a node's own metrics registry (no global state),
// with the Go runtime and process collectors on it.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// registerGauges adds the node's operational gauges, eligibility and the
// step-down cooldown, to reg, next to the metrics package's.
func (n *nodeState) registerGauges(reg prometheus.Registerer) error {
	cl := prometheus.Labels{"election": n.election}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "baton_eligible", ConstLabels: cl,
			Help: "1 while this instance may campaign, 0 on standby."}, func() float64 {
			if n.elector.Eligible() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "baton_step_down_cooldown_seconds", ConstLabels: cl,
			Help: "Time left before this instance campaigns again after a step-down; 0 when none."}, func() float64 {
			if u := n.cooldownUntil(); !u.IsZero() {
				return max(time.Until(u).Seconds(), 0)
			}
			return 0
		}),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: register: %w", err)
		}
	}
	return nil
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

// server is the node's HTTP interface. Handlers are registered in routes.
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
	s.mux.HandleFunc("GET /{$}", s.handlePage)
	reg := s.node.registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	s.mux.HandleFunc("POST /step-down", s.admin(s.handleStepDown))
	s.mux.HandleFunc("POST /standby", s.admin(s.handleStandby))
	s.mux.HandleFunc("POST /eligible", s.admin(s.handleEligible))
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
	Identity      election.Identity    `json:"identity"`
	Election      string               `json:"election"`
	Backend       string               `json:"backend"`
	Where         string               `json:"where"`
	Role          string               `json:"role"` // leader; leader, stepping down; leader, stopping; follower; standby; cooling down; stopping
	Leading       bool                 `json:"leading"`
	Term          *termDoc             `json:"term,omitempty"` // this node's term, when leading
	Leader        *election.LeaderInfo `json:"leader"`         // who leads, as far as this node can tell; null if nobody
	LeaderErr     string               `json:"leader_error,omitempty"`
	LeaderSeen    time.Time            `json:"leader_seen,omitzero"`    // when this node first saw the leader's term (when the backend does not give leader.since)
	Eligible      bool                 `json:"eligible"`                // may campaign
	Standby       bool                 `json:"standby"`                 // not eligible (--standby, POST /standby)
	CooldownUntil time.Time            `json:"cooldown_until,omitzero"` // no campaign before, after POST /step-down
	Admin         bool                 `json:"admin"`                   // admin endpoints enabled
	Running       int                  `json:"running"`                 // runs in flight, across terms
	Healthy       bool                 `json:"healthy"`
	Ready         bool                 `json:"ready"`
	Now           time.Time            `json:"now"` // this node's clock, for relative times
	Jobs          []jobDoc             `json:"jobs"`
}

// jobDoc is one job of /status. With ?history=N, History holds the job's
// last N runs from the ledger: every instance's, newest first.
type jobDoc struct {
	schedulerhost.JobStatus
	History    []schedulerhost.Run `json:"history,omitempty"`
	HistoryErr string              `json:"history_error,omitempty"`
}

// maxStatusHistory caps ?history=N.
const maxStatusHistory = 50

type termDoc struct {
	Token uint64    `json:"token"`
	Since time.Time `json:"since"`
}

// status describes the node; history > 0 adds that many runs per job from
// the ledger.
func (s *server) status(ctx context.Context, history int) statusDoc {
	n := s.node
	d := statusDoc{Identity: n.identity, Election: n.election, Backend: n.backend, Where: n.where,
		Running: n.host.Running(), Eligible: n.elector.Eligible(), CooldownUntil: n.cooldownUntil(),
		Admin: len(n.adminToken) > 0, Now: time.Now()}
	d.Standby = !d.Eligible
	steppingDown := false
	if ti, ok := n.elector.Term(); ok {
		d.Leading = true
		d.Term = &termDoc{Token: ti.Token, Since: ti.Since}
		steppingDown = n.steppingDown(ti.Token)
	}
	d.Role = n.role(d.Leading, steppingDown)
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, js := range n.host.Status() {
		jd := jobDoc{JobStatus: js}
		if history > 0 {
			runs, err := n.host.History(lctx, js.Name, history)
			jd.History = runs
			if err != nil {
				jd.HistoryErr = err.Error()
			}
		}
		d.Jobs = append(d.Jobs, jd)
	}
	if li, err := n.elector.Leader(lctx); err == nil {
		d.Leader = &li
		if li.Since.IsZero() {
			d.LeaderSeen = n.leaderSeen(li.Token)
		}
	} else if !errors.Is(err, election.ErrNoLeader) {
		d.LeaderErr = err.Error()
	}
	d.Healthy, _ = n.health()
	d.Ready, _ = n.ready()
	return d
}

// handleStatus: GET /status[?history=N].
func (s *server) handleStatus(w http.ResponseWriter, r *http.Request) {
	history := 0
	if v := r.URL.Query().Get("history"); v != "" {
		h, err := strconv.Atoi(v)
		if err != nil || h < 0 {
			http.Error(w, fmt.Sprintf("history %q: want a count of runs", v), http.StatusBadRequest)
			return
		}
		history = min(h, maxStatusHistory)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.status(r.Context(), history))
}
