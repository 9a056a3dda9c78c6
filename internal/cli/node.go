package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/httpapi/appcheck"
	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

// errStdinClosed is the cause of a shutdown started by --stop-on-stdin-eof.
var errStdinClosed = errors.New("stdin closed (the cluster is gone)")

// backendFlagSet returns the flag set of subcommand name, one that opens
// a backend: the backend flags and the log flags are registered on it.
func backendFlagSet(name string) (*flag.FlagSet, *BackendFlags, *LogFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	bf, lf := new(BackendFlags), new(LogFlags)
	bf.Register(fs)
	lf.Register(fs)
	return fs, bf, lf
}

// nodeOnlyFlags are the flags of a node that are not backend flags: what a
// config file's node section may set.
var nodeOnlyFlags = []string{"id", "http", "standby", "step-down-cooldown", "admin-token-file", "log-format", "log-level"}

// nodeOpts are a node's flags.
type nodeOpts struct {
	bf                *BackendFlags
	lf                *LogFlags
	id, config        string
	httpAddr          string
	stdinEOF, standby bool
	cooldown          time.Duration
	tokenFile         string
}

// nodeSettings parses a node's flags from args, reads its config file
// (--config, else $BATON_CONFIG, else the built-in jobs) and applies the
// file's settings and the environment under the command line's flags.
func (p *Program) nodeSettings(sub string, args []string, stderr io.Writer) (*nodeOpts, *jobsfile.File, *settings, error) {
	fs, bf, lf := backendFlagSet(sub)
	o := &nodeOpts{bf: bf, lf: lf}
	fs.StringVar(&o.id, "id", "", "identity, unique per process (default HOSTNAME-PID)")
	fs.StringVar(&o.config, "config", "", p.configHelp())
	defHTTP := p.DefaultHTTP
	if defHTTP == "" {
		defHTTP = "127.0.0.1:0"
	}
	fs.StringVar(&o.httpAddr, "http", defHTTP, "address of the status page, /status, /metrics, /healthz, /readyz and the admin endpoints;\nloopback unless you say otherwise (\"\" for none)")
	fs.BoolVar(&o.stdinEOF, "stop-on-stdin-eof", false, "stop gracefully when stdin reaches EOF (set by demo cluster)")
	fs.BoolVar(&o.standby, "standby", false, "start not eligible: follow, never campaign until POST /eligible")
	fs.DurationVar(&o.cooldown, "step-down-cooldown", httpapi.DefaultStepDownCooldown, "after POST /step-down, no campaign for this long (?cooldown= overrides)")
	fs.StringVar(&o.tokenFile, "admin-token-file", "", "file holding the bearer token of the admin endpoints (default: env "+httpapi.AdminTokenEnv+"; neither: admin endpoints disabled)")
	if f := fs.Lookup("election"); p.DefaultJobs == nil && f != nil {
		f.Usage, f.DefValue = "election name, shared by the instances of one service (required, here or as election.name in the config file)", ""
	}
	if err := p.ParseFlags(fs, args, stderr); err != nil {
		return nil, nil, nil, err
	}
	getenv := p.getenv()
	if !flagSet(fs, "config") {
		o.config = getenv(EnvName("config"))
	}
	f, err := p.LoadJobs(o.config)
	if err != nil {
		return nil, nil, nil, err
	}
	src, err := apply(fs, f, nodeOnlyFlags, getenv, "config", "stop-on-stdin-eof")
	if err != nil {
		return nil, nil, nil, err
	}
	if _, given := src.from["election"]; p.DefaultJobs == nil && !given && !flagSet(fs, "election") {
		// Two services that both left it out would share one leader.
		where := f.Path
		if f.Election.Line > 0 {
			where = fmt.Sprintf("%s:%d", f.Path, f.Election.Line) // an empty election: section
		}
		return nil, nil, nil, fmt.Errorf("%s: election.name: required: the election this service's instances share, e.g. billing-jobs (or --election, $%s)",
			where, EnvName("election"))
	}
	return o, f, src, nil
}

// Node runs one instance: `demo node` or `baton run`. Its flags come from
// the config file's backend and node sections, then from BATON_*
// variables, then from the command line, each over the one before. It
// goes in phases: the settings (nodeSettings, nodeStart), the tracing
// (tracing.FromEnv: the OTEL_* variables), the backend (openNode), the
// HTTP listener (listenNode), the instance's Config (nodeConfig), then
// baton.New and RunServing until ctx ends.
func (p *Program) Node(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	opts, f, src, err := p.nodeSettings(sub, args, stderr)
	if err != nil {
		return err
	}
	st, err := nodeStart(opts, src, stderr)
	if err != nil {
		return err
	}
	tp, shutdownTracing, err := tracing.FromEnv(ctx) // off unless the OTEL_* variables ask (docs/tracing.md)
	if err != nil {
		return fmt.Errorf("%s %s: %w", p.Name, sub, err)
	}
	defer func() { // after the instance stopped: flush what is left, shut the exporter down
		sctx, cancel := context.WithTimeout(context.Background(), tracing.FlushTimeout)
		defer cancel()
		_ = shutdownTracing(sctx)
	}()
	o, err := p.openNode(ctx, sub, opts, f, src, st.base)
	if err != nil {
		return err
	}
	defer o.Close()
	cfg, app, err := p.nodeConfig(opts, f, o, st)
	if err != nil {
		return err
	}
	ln, httpURL, err := listenNode(opts.httpAddr, st, src)
	if err != nil {
		return err
	}
	cfg.Advanced.Address = strings.TrimPrefix(httpURL, "none")
	cfg.Advanced.TracerProvider = tp
	b, err := baton.New(cfg)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		if _, ok := errors.AsType[*schedulerhost.ConfigError](err); ok {
			return f.Locate(err) // a job's settings: point at its line
		}
		return err
	}
	log := st.log
	log.Info("node started", "pid", os.Getpid(), "backend", opts.bf.Kind, "where", o.Where,
		"http", httpURL, "config", f.Path, "jobs", len(f.Jobs), "eligible", !opts.standby, "admin", st.adminFrom, "app_check", appCheckOf(app))

	if opts.stdinEOF {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		// Reads until the cluster's end of the pipe closes; the process
		// exits without waiting for it.
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel(errStdinClosed)
		}()
	}

	if err := b.RunServing(ctx, ln); err != nil {
		log.Error("node stopped", "err", err)
		return err
	}
	log.Info("node stopped")
	return nil
}

// nodeStarted is what a node's start makes of its settings: its loggers,
// its admin token, its identity.
type nodeStarted struct {
	base      *slog.Logger // the log flags' logger
	log       *slog.Logger // base with the election and the identity
	adminTok  []byte       // nil: the admin endpoints are disabled
	adminFrom string       // where the token came from, for the log
}

// nodeStart checks the settings that need no backend, reads the admin
// token, and gives the node its identity (HOSTNAME-PID by default, in
// opts.id) and its loggers.
func nodeStart(opts *nodeOpts, src *settings, stderr io.Writer) (*nodeStarted, error) {
	base, err := opts.lf.Logger(stderr)
	if err != nil {
		return nil, src.locate(err)
	}
	if opts.cooldown < 0 {
		return nil, src.locate(fmt.Errorf("--step-down-cooldown %v: must not be negative", opts.cooldown))
	}
	tok, from, err := httpapi.LoadAdminToken(opts.tokenFile)
	if err != nil {
		return nil, src.locate(err)
	}
	if opts.id == "" {
		host, _ := os.Hostname()
		opts.id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	// Backends and the Elector add election (and identity) themselves.
	log := base.With("election", opts.bf.Election, "identity", opts.id)
	return &nodeStarted{base: base, log: log, adminTok: tok, adminFrom: from}, nil
}

// openNode opens the backend the settings name, with the election
// section's timing, and checks it (driver.Checker, 15 s at most). It
// refuses a backend that keeps no ledger. The caller closes it.
func (p *Program) openNode(ctx context.Context, sub string, opts *nodeOpts, f *jobsfile.File, src *settings, base *slog.Logger) (*Opened, error) {
	bf := opts.bf
	timing := election.Timing{TTL: f.Election.TTL, RenewInterval: f.Election.RenewInterval, SafetyMargin: f.Election.SafetyMargin}
	o, err := bf.Open(ctx, timing, f.Election.PollInterval, base)
	if err != nil {
		if strings.Contains(err.Error(), "invalid config") {
			return nil, src.locateOpen(err, f) // each problem at its key's line
		}
		return nil, fmt.Errorf("%s %s: %w", p.Name, sub, src.locate(err))
	}
	if o.Ledger == nil {
		o.Close()
		return nil, fmt.Errorf("%s %s: --backend %s: keeps no tick ledger yet, so it cannot run jobs once per tick; use it with baton lock", p.Name, sub, bf.Kind)
	}
	if ch, ok := o.Backend.(driver.Checker); ok {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := ch.Check(cctx)
		cancel()
		if err != nil {
			o.Close()
			return nil, fmt.Errorf("%s %s: %w", p.Name, sub, src.locate(fmt.Errorf("%s: %w", o.Where, bf.Explain(err))))
		}
	}
	return o, nil
}

// nodeConfig is the instance's baton.Config: the jobs file's jobs and
// settings, the flags', and the opened backend's, all as named fields,
// as any embedder gives them; the caller adds Advanced.Address once it
// listens. It also returns the application check, nil if none.
func (p *Program) nodeConfig(opts *nodeOpts, f *jobsfile.File, o *Opened, st *nodeStarted) (baton.Config, *appcheck.Checker, error) {
	name, id, log := opts.bf.Election, opts.id, st.log
	hcfg, err := HostConfig(f, name, id, log)
	if err != nil {
		return baton.Config{}, nil, err
	}
	app, err := AppChecker(f)
	if err != nil {
		return baton.Config{}, nil, err
	}
	return baton.Config{
		Backend: o.Backend, Election: name, Jobs: hcfg.Jobs, Instance: id,
		ShutdownTimeout: hcfg.ShutdownTimeout, AdminToken: st.adminTok, Logger: log,
		Advanced: baton.Advanced{
			KillGrace: hcfg.KillGrace, Ledger: o.Ledger, Control: o.Control,
			RetryPeriod: f.Election.RetryPeriod, ReleaseTimeout: f.Election.ReleaseTimeout,
			ElectionLogger: st.base, // the Elector adds election and identity itself
			BackendKind:    opts.bf.Kind, BackendWhere: o.Where, StepDownCooldown: opts.cooldown,
			Version: version(), App: app, JobsHash: f.JobsHash(),
			Reloader:      newFileReloader(f, func() (*jobsfile.File, error) { return p.LoadJobs(opts.config) }, name, id, log),
			Standby:       opts.standby,
			ReloadSignals: []os.Signal{syscall.SIGHUP}, // re-reads the jobs file, as POST /reload does
		},
	}, app, nil
}

// listenNode listens on addr (--http) for the HTTP API: nil and "none"
// when addr is "". It warns when the admin endpoints are reachable beyond
// loopback over plain HTTP.
func listenNode(addr string, st *nodeStarted, src *settings) (net.Listener, string, error) {
	if addr == "" {
		return nil, "none", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", src.locate(fmt.Errorf("--http %s: %w", addr, err))
	}
	httpURL := "http://" + ln.Addr().String()
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil && !ap.Addr().IsLoopback() && st.adminTok != nil {
		st.log.Warn("admin endpoints reachable beyond loopback over plain HTTP: the bearer token travels in clear", "http", httpURL)
	}
	return ln, httpURL, nil
}

// version is the module version the binary was built from, or "devel".
func version() string { return Version() }

// Version is the version a release stamped in (version.go), else the
// module version the binary was built from, or "devel".
func Version() string {
	if stampVersion != "" {
		return stampVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// appCheckOf is what the node started checks of its application.
func appCheckOf(c *appcheck.Checker) string {
	if c == nil {
		return "none"
	}
	return c.State().Check
}
