package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi/appcheck"
	"github.com/batonhq/baton/schedulerhost"
)

// Config configures an API.
type Config struct {
	// Elector campaigns; the runner calls Elector.Run(ctx, Host.Lead).
	// The API reads its state and asks it to step down, to stand by, to
	// hold. Required.
	Elector *election.Elector
	// Host runs the jobs while the Elector leads. Required.
	Host *schedulerhost.Host
	// Election is the election's name, shown by /status and used as the
	// election label of the node's gauges. Required.
	Election string
	// Backend is the backend's kind (etcd, postgres, mysql, consul, ...)
	// and Where what an operator looks at on it (a prefix, key or table),
	// both shown by /status. Optional.
	Backend, Where string
	// Registry is served on /metrics; New adds the node's gauges
	// (baton_eligible, baton_step_down_cooldown_seconds) to it. Nil means
	// a new empty registry.
	Registry *prometheus.Registry
	// AdminToken is the bearer token of the admin endpoints (POST
	// /step-down, /standby, /eligible, /reload). Nil or empty disables them.
	AdminToken []byte
	// StepDownCooldown is the cooldown of a POST /step-down without
	// ?cooldown=. Zero means none; it must not be negative.
	StepDownCooldown time.Duration
	// Reloader reads the job set again for Reload (SIGHUP with
	// ReloadOn, POST /reload). Nil: Reload is refused.
	Reloader Reloader
	// JobsHash is the hash of the job set the Host starts with, shown on
	// /status (a Reload shows its set's). Optional.
	JobsHash string
	// Control is the election's control store (package control), if its
	// backend has one: with it, the node serves pause, resume and run
	// now (POST /jobs/{job}/pause, /resume, /run; GET /runs/{id}),
	// publishes itself in the registry of instances, and /status shows
	// the pauses, the instances and the terms the Host records. Give the
	// Host the same store (schedulerhost.Config.Control).
	Control control.Store
	// Version is the program's version, published in the registry.
	Version string
	// Address is where this node's HTTP API is reached, published in the
	// registry (so that the status page can link to the other
	// instances). Optional.
	Address string
	// InstanceInterval is how often Publish writes this instance's entry
	// in the registry. Zero means DefaultInstanceInterval.
	InstanceInterval time.Duration
	// App checks the application beside the node, if any: while it is
	// not healthy the node does not campaign (Elector.Hold), and a leader
	// steps down (with StepDownCooldown) when it turns unhealthy. A term
	// won while the hold began is the Elector's to step down: give it
	// election.Config.HoldCooldown, StepDownCooldown as a rule. WatchApp
	// runs its checks; /status shows its state. Nil means no check.
	App *appcheck.Checker
	// Logger receives the node's records (admin requests, shutdown).
	// Nil means slog.Default().
	Logger *slog.Logger
}

// API is one instance's HTTP API and health verdicts, over its Elector
// and the Host whose Lead that Elector runs. Create it with New. It starts
// no goroutine of its own: the runner that runs the Elector (package
// baton's Run) runs Publish, WatchApp and ReloadOn beside it, serves
// Handler, and tells the verdicts how the run goes (SetLoopAlive,
// SetStopping).
type API struct {
	cfg Config

	loopAlive atomic.Bool // the elector's Run is going (SetLoopAlive)
	stopping  atomic.Bool // a shutdown has begun (SetStopping)

	reloadMu sync.Mutex // one Reload at a time

	mu        sync.Mutex
	seenToken uint64             // the leader's token when /status last looked
	seenAt    time.Time          // when /status first saw seenToken
	jobsHash  string             // the hash of the job set the Host runs
	pollErrs  map[Poll]PollError // each poll's last failed round (polls.go)

	refusedWarned time.Time // when a leader whose claims are refused last said why it stays (refused.go); under mu

	pageAudit pageAudit // the status page's accounting, kept PageAuditTTL (audit.go)

	handler http.Handler
}

// New copies cfg, checks it, registers the API's gauges, registers its
// callback for refused claims with the Host (Host.OnClaimsRefused) and,
// with an App, holds the Elector until the application's first check
// (Elector.Hold). It does not start anything.
func New(cfg Config) (*API, error) {
	var errs []error
	if cfg.Elector == nil {
		errs = append(errs, errors.New("httpapi: Elector is required"))
	}
	if cfg.Host == nil {
		errs = append(errs, errors.New("httpapi: Host is required"))
	}
	if cfg.Election == "" {
		errs = append(errs, errors.New("httpapi: Election is required"))
	}
	if cfg.InstanceInterval < 0 {
		errs = append(errs, fmt.Errorf("httpapi: InstanceInterval %v: must not be negative", cfg.InstanceInterval))
	}
	if cfg.StepDownCooldown < 0 {
		errs = append(errs, fmt.Errorf("httpapi: StepDownCooldown %v: must not be negative", cfg.StepDownCooldown))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.InstanceInterval == 0 {
		cfg.InstanceInterval = DefaultInstanceInterval
	}
	cfg.AdminToken = append([]byte(nil), cfg.AdminToken...)
	a := &API{cfg: cfg, jobsHash: cfg.JobsHash}
	cfg.Host.OnClaimsRefused(a.claimsRefused)
	if err := a.registerGauges(cfg.Registry); err != nil {
		return nil, err
	}
	if cfg.App != nil { // no campaign before the first check
		cfg.Elector.Hold(cfg.App.State().Why())
	}
	a.handler = newServer(a)
	return a, nil
}

// SetLoopAlive tells the verdicts whether the Elector's Run is going:
// until it is told true, and once told false, Healthy and Ready say
// "election loop not running". The runner (package baton's Run) calls it
// with true right before it starts Elector.Run and with false once that
// returned; a caller that runs the Elector by hand does the same. It does
// not block.
func (a *API) SetLoopAlive(alive bool) { a.loopAlive.Store(alive) }

// SetStopping tells the verdicts that a shutdown has begun: from then on
// Ready says "shutting down" and the role on /status says stopping. The
// runner calls it once its context ended (SIGTERM, say) or one of its
// parts failed; it cannot be undone. It does not block.
func (a *API) SetStopping() { a.stopping.Store(true) }

// Handler returns the HTTP API, for a server of the runner's (package
// baton's RunServing) or of the caller's own: GET / (the status page),
// /status, /audit (the tick accounting, with a control store), /metrics,
// and /healthz and /readyz (200 "ok", or 503 and the
// verdict's first reason), GET /runs/{id}, and the admin endpoints POST
// /step-down, /standby, /eligible, /reload and /jobs/{job}/pause,
// /resume and /run (the last three need a Control store). Handlers may
// run on any goroutine, before, during and after the run.
func (a *API) Handler() http.Handler { return a.handler }

// Verdict is the answer of Healthy or Ready. Reasons lists every check
// that failed, the most basic first; it is empty when OK.
type Verdict struct {
	OK      bool
	Reasons []string
}

// String returns "ok", or the reasons joined by "; ".
func (v Verdict) String() string {
	if v.OK {
		return "ok"
	}
	return strings.Join(v.Reasons, "; ")
}

// first is what /healthz and /readyz answer: "ok" or the most basic
// reason.
func (v Verdict) first() string {
	if v.OK || len(v.Reasons) == 0 {
		return "ok"
	}
	return v.Reasons[0]
}

func verdict(reasons []string) Verdict { return Verdict{OK: len(reasons) == 0, Reasons: reasons} }

// Healthy is the verdict of /healthz. A node is unhealthy while its
// election loop is not running (SetLoopAlive: before the run, after it), while
// runs of an ended term are still going (they ignored their cancellation),
// or while runs are going although it does not lead: they may overlap
// with the new leader's. A supervisor should restart an unhealthy node.
// It does not block; any goroutine may call it.
func (a *API) Healthy() Verdict {
	var reasons []string
	if !a.loopAlive.Load() {
		reasons = append(reasons, "election loop not running")
	}
	if r := a.cfg.Host.Abandoned(); r > 0 {
		reasons = append(reasons, fmt.Sprintf("%d runs of an ended term still going", r))
	}
	if r := a.cfg.Host.Running(); r > 0 && !a.cfg.Elector.IsLeader() {
		reasons = append(reasons, fmt.Sprintf("%d runs still going without leadership", r))
	}
	return verdict(reasons)
}

// Ready is the verdict of /readyz: ready while the election loop runs, no
// shutdown has begun, and the last attempts to acquire did not all fail
// (election.Elector.AcquireFailing: the node cannot take part in the
// election). It does not block; any goroutine may call it.
func (a *API) Ready() Verdict {
	var reasons []string
	if a.stopping.Load() {
		reasons = append(reasons, "shutting down")
	}
	if !a.loopAlive.Load() {
		reasons = append(reasons, "election loop not running")
	}
	if err := a.cfg.Elector.AcquireFailing(); err != nil {
		reasons = append(reasons, err.Error())
	}
	return verdict(reasons)
}

// stepDown asks the elector to step down with cooldown. It reports whether
// a term was held and its token, and when the cooldown ends.
func (a *API) stepDown(cooldown time.Duration) (leading bool, token uint64, until time.Time) {
	el := a.cfg.Elector
	ti, held := el.Term()
	until = time.Now().Add(cooldown)
	leading = el.StepDown(cooldown)
	if held && leading {
		token = ti.Token
	}
	return leading, token, until
}

// leaderSeen returns when this node first reported the term with token
// (for backends that do not tell since when a leader leads).
func (a *API) leaderSeen(token uint64) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seenToken != token || a.seenAt.IsZero() {
		a.seenToken, a.seenAt = token, time.Now()
	}
	return a.seenAt
}

// role is this node's part in one word or two, for people.
func (a *API) role(leading, steppingDown bool) string {
	el := a.cfg.Elector
	switch {
	case a.stopping.Load() && leading:
		return "leader, stopping"
	case steppingDown:
		return "leader, stepping down"
	case leading:
		return "leader"
	case a.stopping.Load():
		return "stopping"
	case !el.Eligible():
		return "standby"
	case el.Held() != "":
		return "app unhealthy"
	case !el.CooldownUntil().IsZero():
		return "cooling down"
	}
	return "follower"
}
