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
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/schedulerhost"
)

// errStdinClosed is the cause of a shutdown started by --stop-on-stdin-eof.
var errStdinClosed = errors.New("stdin closed (the cluster is gone)")

// killGraceMargin is added to the kill grace for the Host's own wait after
// cancelling runs, so that a command killed at the end of its grace is
// seen to return.
const killGraceMargin = time.Second

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	var bf backendFlags
	bf.register(fs)
	var lf logFlags
	lf.register(fs)
	id := fs.String("id", "", "identity, unique per process (default HOSTNAME-PID)")
	config := fs.String("config", "", "jobs file (default: the built-in jobs.example.yaml)")
	httpAddr := fs.String("http", "127.0.0.1:0", "address of the status page, /status, /metrics, /healthz, /readyz and the admin endpoints;\nloopback unless you say otherwise (\"\" for none)")
	stdinEOF := fs.Bool("stop-on-stdin-eof", false, "stop gracefully when stdin reaches EOF (set by demo cluster)")
	standby := fs.Bool("standby", false, "start not eligible: follow, never campaign until POST /eligible")
	cooldown := fs.Duration("step-down-cooldown", defaultStepDownCooldown, "after POST /step-down, no campaign for this long (?cooldown= overrides)")
	tokenFile := fs.String("admin-token-file", "", "file holding the bearer token of the admin endpoints (default: env "+adminTokenEnv+"; neither: admin endpoints disabled)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	base, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	if *cooldown < 0 {
		return fmt.Errorf("--step-down-cooldown %v: must not be negative", *cooldown)
	}
	adminToken, adminFrom, err := loadAdminToken(*tokenFile)
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
	log := base.With("election", bf.election, "identity", *id)

	timing := election.Timing{TTL: f.Election.TTL, RenewInterval: f.Election.RenewInterval, SafetyMargin: f.Election.SafetyMargin}
	o, err := bf.open(ctx, timing, f.Election.PollInterval, base)
	if err != nil {
		if f.Election.Line > 0 && strings.Contains(err.Error(), "invalid config") {
			return fmt.Errorf("%s:%d: election: %w", f.Path, f.Election.Line, err)
		}
		return err
	}
	defer o.close()
	if ch, ok := o.backend.(election.Checker); ok {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := ch.Check(cctx)
		cancel()
		if err != nil {
			return fmt.Errorf("demo node: %s: %w", o.where, err)
		}
	}

	reg := newRegistry()
	m, err := metrics.New(reg, bf.election)
	if err != nil {
		return err
	}

	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs:            hostJobs(f, bf.election, *id, log),
		ShutdownTimeout: f.Election.ShutdownTimeout,
		KillGrace:       killGrace(f) + killGraceMargin,
		Ledger:          o.ledger,
		Instance:        *id,
		Observer:        m,
		Logger:          log,
	})
	if err != nil {
		return f.Locate(err)
	}
	el, err := election.New(election.Config{
		Backend:        o.backend,
		Identity:       election.Identity{ID: *id},
		Election:       bf.election,
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

	n := &nodeState{identity: el.Identity(), election: bf.election, backend: bf.kind, where: o.where, elector: el, host: host,
		registry: reg, adminToken: adminToken, stepDownCooldown: *cooldown, log: log}
	if err := n.registerGauges(reg); err != nil {
		return err
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
	log.Info("node started", "pid", os.Getpid(), "backend", bf.kind, "where", o.where,
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

	g, gctx := errgroup.WithContext(ctx)
	electorDone := make(chan struct{})
	n.loopAlive.Store(true)
	g.Go(func() error {
		defer close(electorDone)
		defer n.loopAlive.Store(false)
		return el.Run(gctx, host.Lead)
	})
	g.Go(func() error {
		<-gctx.Done()
		n.stopping.Store(true)
		if ctx.Err() != nil {
			log.Info("shutting down: draining runs, then releasing", "reason", context.Cause(ctx), "running", host.Running())
		}
		return nil
	})
	if ln != nil {
		s := newServer(n)
		g.Go(func() error { return s.serve(ln, electorDone) })
	}
	err = g.Wait()
	if err != nil {
		log.Error("node stopped", "err", err)
		return err
	}
	log.Info("node stopped")
	return nil
}
