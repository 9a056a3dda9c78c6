package main

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

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/node"
	"github.com/batonhq/baton/schedulerhost"
)

// errStdinClosed is the cause of a shutdown started by --stop-on-stdin-eof.
var errStdinClosed = errors.New("stdin closed (the cluster is gone)")

// backendFlagSet returns the flag set of subcommand name, one that opens
// a backend: the backend flags and the log flags are registered on it.
func backendFlagSet(name string) (*flag.FlagSet, *node.BackendFlags, *node.LogFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	bf, lf := new(node.BackendFlags), new(node.LogFlags)
	bf.Register(fs)
	lf.Register(fs)
	return fs, bf, lf
}

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, bf, lf := backendFlagSet("node")
	id := fs.String("id", "", "identity, unique per process (default HOSTNAME-PID)")
	config := fs.String("config", "", "jobs file (default: the built-in jobs.example.yaml)")
	httpAddr := fs.String("http", "127.0.0.1:0", "address of the status page, /status, /metrics, /healthz, /readyz and the admin endpoints;\nloopback unless you say otherwise (\"\" for none)")
	stdinEOF := fs.Bool("stop-on-stdin-eof", false, "stop gracefully when stdin reaches EOF (set by demo cluster)")
	standby := fs.Bool("standby", false, "start not eligible: follow, never campaign until POST /eligible")
	cooldown := fs.Duration("step-down-cooldown", node.DefaultStepDownCooldown, "after POST /step-down, no campaign for this long (?cooldown= overrides)")
	tokenFile := fs.String("admin-token-file", "", "file holding the bearer token of the admin endpoints (default: env "+node.AdminTokenEnv+"; neither: admin endpoints disabled)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	base, err := lf.Logger(stderr)
	if err != nil {
		return err
	}
	if *cooldown < 0 {
		return fmt.Errorf("--step-down-cooldown %v: must not be negative", *cooldown)
	}
	adminToken, adminFrom, err := node.LoadAdminToken(*tokenFile)
	if err != nil {
		return err
	}
	f, err := loadJobs(*config)
	if err != nil {
		return err
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
		if f.Election.Line > 0 && strings.Contains(err.Error(), "invalid config") {
			return fmt.Errorf("%s:%d: election: %w", f.Path, f.Election.Line, err)
		}
		return err
	}
	defer o.Close()
	if ch, ok := o.Backend.(election.Checker); ok {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := ch.Check(cctx)
		cancel()
		if err != nil {
			return fmt.Errorf("demo node: %s: %w", o.Where, err)
		}
	}

	reg := node.NewRegistry()
	m, err := metrics.New(reg, bf.Election)
	if err != nil {
		return err
	}

	hcfg, err := node.HostConfig(f, bf.Election, *id, log)
	if err != nil {
		return err
	}
	hcfg.Ledger, hcfg.Observer, hcfg.Control = o.Ledger, m, o.Control
	host, err := schedulerhost.New(hcfg)
	if err != nil {
		return f.Locate(err)
	}
	el, err := election.New(election.Config{
		Backend:        o.Backend,
		Identity:       election.Identity{ID: *id},
		Election:       bf.Election,
		RetryPeriod:    f.Election.RetryPeriod,
		ReleaseTimeout: f.Election.ReleaseTimeout,
		Observer:       m,
		Logger:         base,
	})
	if err != nil {
		return err
	}
	if *standby {
		el.SetEligible(false)
	}

	var ln net.Listener
	httpURL := "none"
	if *httpAddr != "" {
		ln, err = net.Listen("tcp", *httpAddr)
		if err != nil {
			return fmt.Errorf("--http: %w", err)
		}
		httpURL = "http://" + ln.Addr().String()
		if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil && !ap.Addr().IsLoopback() && adminToken != nil {
			log.Warn("admin endpoints reachable beyond loopback over plain HTTP: the bearer token travels in clear", "http", httpURL)
		}
	}
	n, err := node.New(node.Config{Elector: el, Host: host, Election: bf.Election, Backend: bf.Kind, Where: o.Where,
		Registry: reg, AdminToken: adminToken, StepDownCooldown: *cooldown, Logger: log,
		Control: o.Control, Version: version(), Address: strings.TrimPrefix(httpURL, "none"),
		JobsFile: f, ReadJobs: func() (*jobsfile.File, error) { return loadJobs(*config) }})
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return err
	}
	// SIGHUP re-reads the jobs file, as POST /reload does.
	stopReload := n.ReloadOnSignal(ctx, syscall.SIGHUP)
	defer stopReload()
	log.Info("node started", "pid", os.Getpid(), "backend", bf.Kind, "where", o.Where,
		"http", httpURL, "config", f.Path, "jobs", len(f.Jobs), "eligible", !*standby, "admin", adminFrom)

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

	if err := n.Run(ctx, ln); err != nil {
		log.Error("node stopped", "err", err)
		return err
	}
	log.Info("node stopped")
	return nil
}

// version is the module version the binary was built from, or "devel".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
