package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi/appcheck"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// server is the node's HTTP interface. Handlers are registered in routes.
type server struct {
	api *API
	mux *http.ServeMux
}

func newServer(a *API) *server {
	s := &server{api: a, mux: http.NewServeMux()}
	s.routes()
	return s
}

func (s *server) routes() {
	s.mux.HandleFunc("GET /healthz", s.handleHealthz)
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	s.mux.HandleFunc("GET /status", s.handleStatus)
	s.mux.HandleFunc("GET /audit", s.handleAudit)
	s.mux.HandleFunc("GET /{$}", s.handlePage)
	reg := s.api.cfg.Registry
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}))
	s.mux.HandleFunc("POST /step-down", s.admin(s.handleStepDown))
	s.mux.HandleFunc("POST /standby", s.admin(s.handleStandby))
	s.mux.HandleFunc("POST /eligible", s.admin(s.handleEligible))
	s.mux.HandleFunc("POST /reload", s.admin(s.handleReload))
	s.mux.HandleFunc("POST /jobs/{job}/pause", s.admin(s.handlePause))
	s.mux.HandleFunc("POST /jobs/{job}/resume", s.admin(s.handleResume))
	s.mux.HandleFunc("POST /jobs/{job}/run", s.admin(s.handleRunNow))
	s.mux.HandleFunc("GET /runs/{id}", s.handleRun)
}

// ServeHTTP serves the routes. The request target "*" (RFC 9110, 7.1) is
// for OPTIONS only: net/http's server answers "OPTIONS *" itself, and
// ServeMux answers any other method on it with an empty 400, so both are
// answered here, where a handler reached directly (or through a proxy)
// sees them too.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.RequestURI == "*" {
		if r.Method == http.MethodOptions {
			w.Header().Set("Allow", "GET, HEAD, POST, OPTIONS")
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Error(w, fmt.Sprintf("request target \"*\" is for OPTIONS only, not %q", r.Method), http.StatusBadRequest)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func plain(w http.ResponseWriter, ok bool, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, reason)
}

func (s *server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	v := s.api.Healthy()
	plain(w, v.OK, v.first())
}

func (s *server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	v := s.api.Ready()
	plain(w, v.OK, v.first())
}

// Status describes a node: the JSON of GET /status.
type Status struct {
	Identity      election.Identity    `json:"identity"`
	Election      string               `json:"election"`
	Backend       string               `json:"backend"`
	Where         string               `json:"where"`
	Role          string               `json:"role"` // leader; leader, stepping down; leader, stopping; follower; standby; app unhealthy; cooling down; stopping
	Leading       bool                 `json:"leading"`
	Term          *StatusTerm          `json:"term,omitempty"` // this node's term, when leading
	Leader        *election.LeaderInfo `json:"leader"`         // who leads, as far as this node can tell; null if nobody
	LeaderErr     string               `json:"leader_error,omitempty"`
	LeaderSeen    time.Time            `json:"leader_seen,omitzero"`    // when this node first saw the leader's term (when the backend does not give leader.since)
	Eligible      bool                 `json:"eligible"`                // may campaign: not on standby, and the application (if checked) is healthy
	Standby       bool                 `json:"standby"`                 // not eligible (--standby, POST /standby)
	NotEligible   string               `json:"not_eligible,omitempty"`  // why not eligible, e.g. "app unhealthy: GET http://127.0.0.1:8081/healthz: connection refused (3 checks)"
	App           *appcheck.State      `json:"app,omitempty"`           // the application's check (Config.App), if any
	CooldownUntil time.Time            `json:"cooldown_until,omitzero"` // no campaign before, after POST /step-down
	Admin         bool                 `json:"admin"`                   // admin endpoints enabled
	Running       int                  `json:"running"`                 // runs in flight, across terms
	Healthy       bool                 `json:"healthy"`
	Ready         bool                 `json:"ready"`
	Now           time.Time            `json:"now"`                 // this node's clock, for relative times
	JobsHash      string               `json:"jobs_hash,omitempty"` // the hash of the job set running (Config.JobsHash, then each Reload's)
	Jobs          []StatusJob          `json:"jobs"`
	// The last round of the absence and of the audit poll, if it failed
	// (SetPollError): the metrics it sets keep their last values. It
	// leaves Ready as it is.
	AbsencePollErr *PollError `json:"absence_poll_error,omitempty"`
	AuditPollErr   *PollError `json:"audit_poll_error,omitempty"`
	// With a control store (Config.Control): every instance of the
	// election, the recorded terms (newest first), and what could not be
	// read.
	Instances  []StatusInstance `json:"instances,omitempty"`
	Terms      []control.Term   `json:"terms,omitempty"`
	ControlErr string           `json:"control_error,omitempty"`
	// With ?audit=1: the window of each job's Audit (DefaultAuditWindow),
	// or why the accounting could not be read.
	AuditWindow string `json:"audit_window,omitempty"`
	AuditErr    string `json:"audit_error,omitempty"`
}

// StatusJob is one job of a Status. With ?history=N, History holds the
// job's last N runs from the ledger: every instance's, newest first.
type StatusJob struct {
	schedulerhost.JobStatus
	History    []ledger.Run   `json:"history,omitempty"`
	HistoryErr string         `json:"history_error,omitempty"`
	Paused     *control.Pause `json:"paused,omitempty"` // with a control store: the job's pause, if paused
	// With ?audit=1, the job's tick accounting of the last
	// DefaultAuditWindow (as GET /audit), read at most once per
	// PageAuditTTL; or why not.
	Audit    *audit.Report `json:"audit,omitempty"`
	AuditErr string        `json:"audit_error,omitempty"`
}

// maxStatusHistory caps ?history=N.
const maxStatusHistory = 50

// StatusTerm is the term a node holds.
type StatusTerm struct {
	Token uint64    `json:"token"`
	Since time.Time `json:"since"`
}

// Status describes the node as GET /status does; history > 0 adds that
// many runs per job (at most 50) from the ledger. It blocks while it asks
// the backend who leads and, with history, the ledger, each for at most
// 2 s; any goroutine may call it.
func (a *API) Status(ctx context.Context, history int) Status {
	history = min(history, maxStatusHistory)
	el, host := a.cfg.Elector, a.cfg.Host
	d := Status{Identity: el.Identity(), Election: a.cfg.Election, Backend: a.cfg.Backend, Where: a.cfg.Where,
		Running: host.Running(), Eligible: el.Eligible() && el.Held() == "", CooldownUntil: el.CooldownUntil(),
		Admin: len(a.cfg.AdminToken) > 0, Now: time.Now()}
	d.Standby = !el.Eligible()
	d.NotEligible = a.notEligible()
	if a.cfg.App != nil {
		st := a.cfg.App.State()
		d.App = &st
	}
	a.mu.Lock()
	d.JobsHash = a.jobsHash
	a.mu.Unlock()
	steppingDown := false
	if ti, ok := el.Term(); ok {
		d.Leading = true
		d.Term = &StatusTerm{Token: ti.Token, Since: ti.Since}
		steppingDown = ti.SteppingDown
	}
	d.Role = a.role(d.Leading, steppingDown)
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, js := range host.Status() {
		jd := StatusJob{JobStatus: js}
		if history > 0 {
			runs, err := host.History(lctx, js.Name, history)
			jd.History = runs
			if err != nil {
				jd.HistoryErr = err.Error()
			}
		}
		d.Jobs = append(d.Jobs, jd)
	}
	if li, err := el.Leader(lctx); err == nil {
		d.Leader = &li
		if li.Since.IsZero() {
			d.LeaderSeen = a.leaderSeen(li.Token)
		}
	} else if !errors.Is(err, election.ErrNoLeader) {
		d.LeaderErr = err.Error()
	}
	if a.cfg.Control != nil {
		a.controlStatus(lctx, &d)
	}
	d.AbsencePollErr, d.AuditPollErr = a.pollError(AbsencePoll), a.pollError(AuditPoll)
	d.Healthy = a.Healthy().OK
	d.Ready = a.Ready().OK
	return d
}

// handleStatus: GET /status[?history=N][&audit=1].
func (s *server) handleStatus(w http.ResponseWriter, r *http.Request) {
	history := 0
	withAudit := false
	if v := r.URL.Query().Get("audit"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			http.Error(w, fmt.Sprintf("audit %q: want 1 or 0", v), http.StatusBadRequest)
			return
		}
		withAudit = b
	}
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
	st := s.api.Status(r.Context(), history)
	if withAudit {
		s.api.addAudit(r.Context(), &st)
	}
	_ = enc.Encode(st)
}
