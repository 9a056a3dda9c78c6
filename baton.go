package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/httpapi/appcheck"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

// Job is one scheduled job: its name, cron schedule, the function it
// runs, and its misfire, overlap and retry policies (schedulerhost.Job).
type Job = schedulerhost.Job

// Verdict is the answer of Healthy and Ready: OK, or the reasons why not.
type Verdict = httpapi.Verdict

// Config configures New.
type Config struct {
	// Backend is the election's backend (backends/etcd, backends/consul,
	// backends/redis, backends/sql/postgres, backends/sql/mysql,
	// backends/kube; backends/memory in one process, for tests). Its
	// ledger, if it has one (each of those does), records every claimed
	// tick: at most one start per tick, and catch-up after a failover. Its
	// control store, if it has one, holds pauses and runs now. Required.
	Backend election.Backend
	// Election names the election: in logs, /status and the metrics'
	// labels. Required.
	Election string
	// Jobs are the jobs the leader runs. At least one.
	Jobs []Job
	// Instance identifies this instance in the election and the run
	// history. Empty means HOSTNAME-PID (-2, -3, ... added for the second
	// and later Batons of one process), unique to this process.
	Instance string
	// Location is the time zone of the schedules. Nil means UTC.
	Location *time.Location
	// ShutdownTimeout bounds the drain when Run's context ends: runs in
	// flight get this long before their context is cancelled. Zero means
	// schedulerhost.DefaultShutdownTimeout; it must not be negative.
	ShutdownTimeout time.Duration
	// AdminToken is the bearer token of Handler's admin endpoints (POST
	// /step-down, /jobs/{job}/pause, ...). Empty disables them.
	AdminToken []byte
	// Registry is served on /metrics, with baton's metrics added. Nil
	// means a new registry.
	Registry *prometheus.Registry
	// Logger receives baton's records. Nil means slog.Default().
	Logger *slog.Logger
	// Advanced holds the settings few embedders need: those the baton
	// command takes from its jobs file and flags. Its zero value keeps
	// every default.
	Advanced Advanced
}

// Advanced is Config's less common settings. Each zero value means the
// default its field names; New refuses a negative duration with an error
// naming the field and the value.
type Advanced struct {
	// KillGrace is how long a graceful stop waits after cancelling the
	// runs still going at ShutdownTimeout, before Run gives up on them
	// (schedulerhost.Config.KillGrace; command jobs get their own grace
	// between SIGTERM and SIGKILL inside it). Zero means
	// schedulerhost.DefaultKillGrace.
	KillGrace time.Duration
	// Ledger replaces the backend's ledger (driver.Ledgerer). Nil means
	// the backend's, if it has one.
	Ledger ledger.Ledger
	// Control replaces the backend's control store (driver.Controller),
	// for the scheduler and the HTTP API alike. Nil means the backend's,
	// if it has one.
	Control control.Store
	// RetryPeriod is the pause after a failed attempt to take the lease,
	// with up to 50% jitter (election.Config.RetryPeriod). Zero means
	// election.DefaultRetryPeriod.
	RetryPeriod time.Duration
	// ReleaseTimeout bounds the release of the lease at a term's end
	// (election.Config.ReleaseTimeout). Zero means
	// election.DefaultReleaseTimeout.
	ReleaseTimeout time.Duration
	// ElectionLogger receives the Elector's records; the Elector adds the
	// election and the identity to them itself. Nil means Logger.
	ElectionLogger *slog.Logger
	// BackendKind is the backend's kind (etcd, postgres, ...) and
	// BackendWhere what an operator looks at on it (a prefix, a key, a
	// table), both shown by /status. Optional.
	BackendKind, BackendWhere string
	// StepDownCooldown is how long this instance does not campaign after
	// it stepped down by itself or was asked to without a cooldown of
	// the request's own: POST /step-down without ?cooldown=, its
	// application turned unhealthy (App), a term won while its
	// application's hold began, its claims refused while another instance
	// could lead. Zero means none.
	StepDownCooldown time.Duration
	// Version is the program's version, published in the registry of
	// instances (with a control store). Optional.
	Version string
	// Address is where this instance's HTTP API is reached, published in
	// the registry, so that the status page links to the other
	// instances. Optional.
	Address string
	// App checks the application beside this instance: while it is not
	// healthy the instance does not campaign, and a leader steps down
	// (StepDownCooldown) when it turns unhealthy. Run runs its checks.
	// Nil means no check.
	App *appcheck.Checker
	// JobsHash is the hash of the job set the instance starts with, shown
	// on /status and published in the registry. Optional.
	JobsHash string
	// Reloader reads the job set again, for POST /reload and
	// ReloadSignals. Nil means a reload is refused.
	Reloader httpapi.Reloader
	// Standby starts the instance not eligible: it follows and does not
	// campaign until POST /eligible.
	Standby bool
	// ReloadSignals are the signals at which Run reloads the job set
	// (Reloader), from Run's start until its shutdown begins: the baton
	// command gives SIGHUP. Empty means none; they need a Reloader.
	ReloadSignals []os.Signal
	// AbsencePollInterval is how often Run's absence poll (absence.go)
	// reads, on every instance, the history of each job with a Deadline
	// and who leads, for the metrics baton_job_overdue and
	// baton_election_leaderless_seconds. Zero means
	// DefaultAbsencePollInterval.
	AbsencePollInterval time.Duration
	// AuditPollInterval is how often Run's audit poll (auditpoll.go)
	// reads, on every instance with a control store, the tick accounting
	// of the last 24 h, for the metric baton_ticks. Zero means
	// DefaultAuditPollInterval; a negative one turns the poll off.
	AuditPollInterval time.Duration
	// NoAccounting: the leader writes no tick accounts
	// (schedulerhost.Config.NoAccounting); the audit then shows what the
	// ledger's newest entries hold, and the older ticks as missed.
	// Nor are the ticks that did not run traced (docs/tracing.md).
	NoAccounting bool
	// TracerProvider, if not nil, traces every run and every tick that
	// did not run (package tracing, docs/tracing.md). Nil means no
	// tracing for New; Main, and the baton command, then take one from
	// the OTEL_* variables (tracing.FromEnv). Run flushes its spans
	// (ForceFlush, if it has one) when it returns, for at most
	// tracing.FlushTimeout; shutting it down is the caller's.
	TracerProvider trace.TracerProvider
}

// check returns one error per bad setting of a, each naming the field and
// its value.
func (a Advanced) check() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"KillGrace", a.KillGrace}, {"RetryPeriod", a.RetryPeriod}, {"ReleaseTimeout", a.ReleaseTimeout}, {"StepDownCooldown", a.StepDownCooldown},
		{"AbsencePollInterval", a.AbsencePollInterval}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("baton: Config.Advanced.%s %v: must not be negative", d.name, d.v))
		}
	}
	if len(a.ReloadSignals) > 0 && a.Reloader == nil {
		errs = append(errs, fmt.Errorf("baton: Config.Advanced.ReloadSignals %v: no Config.Advanced.Reloader to reload with", a.ReloadSignals))
	}
	return errs
}

// Baton is one instance's part in the election and its schedules. Create
// it with New; call Run once.
type Baton struct {
	elector *election.Elector
	host    *schedulerhost.Host
	api     *httpapi.API
	jobs    *control.Jobs
	run     runner      // what Run runs beside the Elector (run.go)
	started atomic.Bool // Run was called: a second call is refused
}

// New checks cfg and builds the instance's elector, scheduler and HTTP
// API. It starts nothing and makes no network call.
func New(cfg Config) (*Baton, error) {
	cfg, err := checked(cfg)
	if err != nil {
		return nil, err
	}
	m, err := metrics.New(cfg.Registry, cfg.Election)
	if err != nil {
		return nil, fmt.Errorf("baton: metrics: %w", err)
	}
	adv := cfg.Advanced
	hcfg := schedulerhost.Config{
		Jobs: cfg.Jobs, Location: cfg.Location, ShutdownTimeout: cfg.ShutdownTimeout, KillGrace: adv.KillGrace,
		Ledger: adv.Ledger, Control: adv.Control, Instance: cfg.Instance, Observer: m, Logger: cfg.Logger,
		NoAccounting: adv.NoAccounting,
	}
	if adv.TracerProvider != nil {
		hcfg.Tracer = tracing.NewTracer(adv.TracerProvider, cfg.Election)
	}
	if l, ok := cfg.Backend.(driver.Ledgerer); ok && hcfg.Ledger == nil {
		hcfg.Ledger = l.Ledger()
	}
	if c, ok := cfg.Backend.(driver.Controller); ok && hcfg.Control == nil {
		hcfg.Control = c.Control()
	}
	if a, ok := cfg.Backend.(driver.Accounter); ok && adv.Control == nil {
		hcfg.Accounts = a.AccountStore()
	}
	if r, ok := cfg.Backend.(driver.LeaderReader); ok {
		hcfg.Leader = r.Leader
	}
	ecfg := election.Config{
		Backend: cfg.Backend, Identity: election.Identity{ID: cfg.Instance}, Election: cfg.Election,
		RetryPeriod: adv.RetryPeriod, ReleaseTimeout: adv.ReleaseTimeout, Logger: cfg.Logger, Observer: m,
		// A term won while the application's hold began steps down as the
		// application's own step-down does.
		HoldCooldown: adv.StepDownCooldown,
	}
	if adv.ElectionLogger != nil {
		ecfg.Logger = adv.ElectionLogger
	}
	host, err := schedulerhost.New(hcfg)
	if err != nil {
		return nil, err
	}
	el, err := election.New(ecfg)
	if err != nil {
		return nil, err
	}
	if adv.Standby {
		el.SetEligible(false)
	}
	api, err := httpapi.New(httpapi.Config{
		Elector: el, Host: host, Election: cfg.Election, Backend: adv.BackendKind, Where: adv.BackendWhere,
		Registry: cfg.Registry, AdminToken: cfg.AdminToken, StepDownCooldown: adv.StepDownCooldown,
		Reloader: adv.Reloader, JobsHash: adv.JobsHash, Control: hcfg.Control, Version: adv.Version,
		Address: adv.Address, App: adv.App, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	b := &Baton{elector: el, host: host, api: api,
		run: runner{flush: adv.TracerProvider, publish: hcfg.Control != nil, watchApp: adv.App != nil, reloadSignals: adv.ReloadSignals, log: cfg.Logger,
			absence: newAbsencePoll(cfg, host, el, m, api), audit: newAuditPoll(cfg, hcfg.Control != nil, host, m, api)}}
	if hcfg.Control != nil {
		b.jobs = control.NewJobs(hcfg.Control)
	}
	return b, nil
}

// checked returns cfg with its defaults filled in (Instance, Logger,
// Registry), or every problem with it, each naming the field.
func checked(cfg Config) (Config, error) {
	var errs []error
	if cfg.Backend == nil {
		errs = append(errs, errors.New("baton: Config.Backend: required"))
	}
	if cfg.Election == "" {
		errs = append(errs, errors.New("baton: Config.Election: required"))
	}
	if len(cfg.Jobs) == 0 {
		errs = append(errs, errors.New("baton: Config.Jobs: at least one job is required"))
	}
	if cfg.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("baton: Config.ShutdownTimeout %v: must not be negative", cfg.ShutdownTimeout))
	}
	errs = append(errs, cfg.Advanced.check()...)
	if cfg.Instance == "" {
		id, err := defaultInstance()
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Instance = id
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = httpapi.NewRegistry()
	}
	return cfg, nil
}

// Run campaigns, runs the jobs while this instance leads, and blocks
// until ctx ends and the instance has stopped: the runs drained (within
// ShutdownTimeout), the lease released. It owns every part of the run
// (run.go): the Elector with the Host's Lead as its lead function, and
// beside it the registry publisher (with a control store), the absence
// poll (absence.go), the audit poll (auditpoll.go), the application check (Advanced.App) and the reload
// at Advanced.ReloadSignals, each on a goroutine of its own; when the first
// returns it stops them all and waits for all. From the moment ctx ends,
// Ready says "shutting down". It returns the first error a part returned
// (the Elector's, say), nil after a clean stop. Call it once: a second
// call (and a RunServing after Run) returns ErrRunTwice at once, closes
// its listener, and changes nothing of the first.
func (b *Baton) Run(ctx context.Context) error { return b.runGroup(ctx, nil) }

// RunServing is Run that also serves Handler on ln (nil: serves
// nothing) until the Elector has returned (the lease released), then
// shuts the server down within httpapi.HTTPShutdownTimeout. It closes
// ln.
func (b *Baton) RunServing(ctx context.Context, ln net.Listener) error {
	return b.runGroup(ctx, ln)
}

// Handler is the HTTP API, for a server of the caller's: GET / (the
// status page), /status, /audit, /metrics, /healthz, /readyz, GET /runs/{id},
// and the admin endpoints (Config.AdminToken).
func (b *Baton) Handler() http.Handler { return b.api.Handler() }

// Healthy is /healthz's verdict: not OK while the election loop is not
// running, or while runs go on without leadership. A supervisor should
// restart an unhealthy instance.
func (b *Baton) Healthy() Verdict { return b.api.Healthy() }

// Ready is /readyz's verdict: not OK once a shutdown has begun, or while
// the last attempts to take the lease all failed (the instance cannot
// take part in the election).
func (b *Baton) Ready() Verdict { return b.api.Ready() }

// Leading reports whether this instance holds the election now.
func (b *Baton) Leading() bool { return b.elector.IsLeader() }

// StepDown hands leadership over if this instance leads: the runs in
// flight drain, the lease is released, and the instance does not campaign
// again for cooldown. It reports whether it was leading.
func (b *Baton) StepDown(cooldown time.Duration) bool { return b.elector.StepDown(cooldown) }

// Jobs is job control on the election's control store: pause and resume
// a job, ask for a run now, read their state. Nil if the backend has no
// control store.
func (b *Baton) Jobs() *control.Jobs { return b.jobs }
