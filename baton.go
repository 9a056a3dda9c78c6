package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/driver"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/schedulerhost"
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
	// schedulerhost.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// AdminToken is the bearer token of Handler's admin endpoints (POST
	// /step-down, /jobs/{job}/pause, ...). Empty disables them.
	AdminToken []byte
	// Registry is served on /metrics, with baton's metrics added. Nil
	// means a new registry.
	Registry *prometheus.Registry
	// Logger receives baton's records. Nil means slog.Default().
	Logger *slog.Logger
	// Tune, if set, adjusts the configurations New derives for the parts
	// it builds, before it builds them, for what Config does not name (a
	// command job's kill grace, the election's retry period, the HTTP
	// API's reloader). The command-line node sets it. New fills in the
	// parts' links to each other (Node.Elector, Node.Host) after it.
	Tune func(*Parts)
}

// Parts are the configurations of the parts New builds, for Config.Tune.
type Parts struct {
	Host     *schedulerhost.Config
	Election *election.Config
	Node     *httpapi.Config
}

// Baton is one instance's part in the election and its schedules. Create
// it with New; call Run once.
type Baton struct {
	elector *election.Elector
	host    *schedulerhost.Host
	node    *httpapi.Node
	jobs    *control.Jobs
}

// New checks cfg and builds the instance's elector, scheduler and HTTP
// API. It starts nothing and makes no network call.
func New(cfg Config) (*Baton, error) {
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
	if cfg.Instance == "" {
		id, err := defaultInstance()
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Instance = id
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = httpapi.NewRegistry()
	}
	m, err := metrics.New(cfg.Registry, cfg.Election)
	if err != nil {
		return nil, fmt.Errorf("baton: metrics: %w", err)
	}
	hcfg := schedulerhost.Config{
		Jobs: cfg.Jobs, Location: cfg.Location, ShutdownTimeout: cfg.ShutdownTimeout,
		Instance: cfg.Instance, Observer: m, Logger: cfg.Logger,
	}
	if l, ok := cfg.Backend.(driver.Ledgerer); ok {
		hcfg.Ledger = l.Ledger()
	}
	if c, ok := cfg.Backend.(driver.Controller); ok {
		hcfg.Control = c.Control()
	}
	ecfg := election.Config{
		Backend: cfg.Backend, Identity: election.Identity{ID: cfg.Instance}, Election: cfg.Election,
		Observer: m, Logger: cfg.Logger,
	}
	ncfg := httpapi.Config{
		Election: cfg.Election, Registry: cfg.Registry,
		AdminToken: cfg.AdminToken, Control: hcfg.Control, Logger: cfg.Logger,
	}
	if cfg.Tune != nil {
		cfg.Tune(&Parts{Host: &hcfg, Election: &ecfg, Node: &ncfg})
	}
	// A term won while the application's hold began steps down as the
	// application's step-down does (httpapi.Config.App).
	ecfg.HoldCooldown = ncfg.StepDownCooldown
	host, err := schedulerhost.New(hcfg)
	if err != nil {
		return nil, err
	}
	el, err := election.New(ecfg)
	if err != nil {
		return nil, err
	}
	ncfg.Elector, ncfg.Host = el, host
	n, err := httpapi.New(ncfg)
	if err != nil {
		return nil, err
	}
	b := &Baton{elector: el, host: host, node: n}
	if hcfg.Control != nil {
		b.jobs = control.NewJobs(hcfg.Control)
	}
	return b, nil
}

// Run campaigns, runs the jobs while this instance leads, and blocks
// until ctx ends and the instance has stopped: the runs drained (within
// ShutdownTimeout), the lease released. It returns nil after a clean
// stop. Call it once: a second call (and a RunServing after Run) returns
// an error at once and changes nothing of the first.
func (b *Baton) Run(ctx context.Context) error { return b.node.Run(ctx, nil) }

// RunServing is Run that also serves Handler on ln until the instance has
// stopped (nil: serves nothing). It closes ln.
func (b *Baton) RunServing(ctx context.Context, ln net.Listener) error {
	return b.node.Run(ctx, ln)
}

// Handler is the HTTP API, for a server of the caller's: GET / (the
// status page), /status, /metrics, /healthz, /readyz, GET /runs/{id},
// and the admin endpoints (Config.AdminToken).
func (b *Baton) Handler() http.Handler { return b.node.Handler() }

// Healthy is /healthz's verdict: not OK while the election loop is not
// running, or while runs go on without leadership. A supervisor should
// restart an unhealthy instance.
func (b *Baton) Healthy() Verdict { return b.node.Healthy() }

// Ready is /readyz's verdict: not OK once a shutdown has begun, or while
// the last attempts to take the lease all failed (the instance cannot
// take part in the election).
func (b *Baton) Ready() Verdict { return b.node.Ready() }

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

// Elector and Host are the parts New built, for what Baton does not
// expose itself.
func (b *Baton) Elector() *election.Elector { return b.elector }

// Host is the scheduler New built (see Elector).
func (b *Baton) Host() *schedulerhost.Host { return b.host }

// Node is the HTTP API and health verdicts New built (see Elector).
func (b *Baton) Node() *httpapi.Node { return b.node }
