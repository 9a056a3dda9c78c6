package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/driver"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/httpapi/appcheck"
	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
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
// variables, then from the command line, each over the one before.
func (p *Program) Node(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	opts, f, src, err := p.nodeSettings(sub, args, stderr)
	if err != nil {
		return err
	}
	bf, lf := opts.bf, opts.lf
	id, config, httpAddr, stdinEOF, standby, cooldown, tokenFile := &opts.id, &opts.config, &opts.httpAddr, &opts.stdinEOF, &opts.standby, &opts.cooldown, &opts.tokenFile
	base, err := lf.Logger(stderr)
	if err != nil {
		return src.locate(err)
	}
	if *cooldown < 0 {
		return src.locate(fmt.Errorf("--step-down-cooldown %v: must not be negative", *cooldown))
	}
	adminToken, adminFrom, err := httpapi.LoadAdminToken(*tokenFile)
	if err != nil {
		return src.locate(err)
	}
	if *id == "" {
		host, _ := os.Hostname()
		*id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	// Backends and the Elector add election (and identity) themselves.
	log := base.With("election", bf.Election, "identity", *id)

	timing := election.Timing{TTL: f.Election.TTL, RenewInterval: f.Election.RenewInterval, SafetyMargin: f.Election.SafetyMargin}
	o, err := bf.Open(ctx, timing, f.Election.PollInterval, base)
	if err != nil {
		if strings.Contains(err.Error(), "invalid config") {
			return src.locateOpen(err, f) // each problem at its key's line
		}
		return fmt.Errorf("%s %s: %w", p.Name, sub, src.locate(err))
	}
	defer o.Close()
	if o.Ledger == nil {
		return fmt.Errorf("%s %s: --backend %s: keeps no tick ledger yet, so it cannot run jobs once per tick; use it with baton lock", p.Name, sub, bf.Kind)
	}
	if ch, ok := o.Backend.(driver.Checker); ok {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := ch.Check(cctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s %s: %w", p.Name, sub, src.locate(fmt.Errorf("%s: %w", o.Where, bf.Explain(err))))
		}
	}

	hcfg, err := HostConfig(f, bf.Election, *id, log)
	if err != nil {
		return err
	}
	app, err := AppChecker(f)
	if err != nil {
		return err
	}

	var ln net.Listener
	httpURL := "none"
	if *httpAddr != "" {
		ln, err = net.Listen("tcp", *httpAddr)
		if err != nil {
			return src.locate(fmt.Errorf("--http %s: %w", *httpAddr, err))
		}
		httpURL = "http://" + ln.Addr().String()
		if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil && !ap.Addr().IsLoopback() && adminToken != nil {
			log.Warn("admin endpoints reachable beyond loopback over plain HTTP: the bearer token travels in clear", "http", httpURL)
		}
	}
	// The node is an embedder of the baton package like any other; what
	// the jobs file and the flags say beyond Config goes in through Tune.
	b, err := baton.New(baton.Config{
		Backend: o.Backend, Election: bf.Election, Jobs: hcfg.Jobs, Instance: *id,
		ShutdownTimeout: hcfg.ShutdownTimeout, AdminToken: adminToken, Logger: log,
		Tune: func(parts *baton.Parts) {
			parts.Host.KillGrace = hcfg.KillGrace
			parts.Host.Ledger, parts.Host.Control, parts.Node.Control = o.Ledger, o.Control, o.Control
			// The Elector adds election and identity itself.
			parts.Election.RetryPeriod, parts.Election.ReleaseTimeout, parts.Election.Logger = f.Election.RetryPeriod, f.Election.ReleaseTimeout, base
			parts.Node.Backend, parts.Node.Where, parts.Node.StepDownCooldown = bf.Kind, o.Where, *cooldown
			parts.Node.Version, parts.Node.Address, parts.Node.App = version(), strings.TrimPrefix(httpURL, "none"), app
			parts.Node.JobsHash = f.JobsHash()
			parts.Node.Reloader = newFileReloader(f, func() (*jobsfile.File, error) { return p.LoadJobs(*config) }, bf.Election, *id, log)
		},
	})
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		if _, ok := errors.AsType[*schedulerhost.ConfigError](err); ok {
			return f.Locate(err) // a job's settings: point at its line
		}
		return err
	}
	if *standby {
		b.Elector().SetEligible(false)
	}
	n := b.Node()
	// SIGHUP re-reads the jobs file, as POST /reload does.
	stopReload := n.ReloadOnSignal(ctx, syscall.SIGHUP)
	defer stopReload()
	log.Info("node started", "pid", os.Getpid(), "backend", bf.Kind, "where", o.Where,
		"http", httpURL, "config", f.Path, "jobs", len(f.Jobs), "eligible", !*standby, "admin", adminFrom, "app_check", appCheckOf(app))

	if *stdinEOF {
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
