package baton

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/batonhq/baton/tracing"
)

// errExitNow is runMain's error after a second signal.
var errExitNow = errors.New("baton: second signal: exiting now, without waiting for the drain")

// Main is a program's whole life as one instance: New, then Run until
// SIGINT or SIGTERM (the runs in flight drain, the lease is released),
// then Close of cfg.Backend if it has one (etcd.Config.Endpoints,
// redis). It returns after a clean stop. If New or Run fails, it logs
// the error to cfg.Logger (nil: slog.Default()) and exits with status 1.
// A second SIGINT or SIGTERM during the drain exits at once with status
// 2, as the baton command does: the lease is not released (it expires
// after its TTL), and the runs in flight end with the process. Jobs are
// Go functions here, so no process of baton's is left running; a process
// a job started itself is the job's to stop (exec.CommandContext on the
// job's context does on a drain's timeout, not on this exit).
// It serves no HTTP; for /healthz and /metrics use New, Handler and Run.
// With no Advanced.TracerProvider, it traces as the OTEL_* variables say
// (tracing.FromEnv, docs/tracing.md); a bad one is an error, as New's.
func Main(cfg Config) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	_, err := runMain(context.Background(), cfg, syscall.SIGINT, syscall.SIGTERM)
	if errors.Is(err, errExitNow) {
		log.Warn(err.Error())
		os.Exit(2)
	}
	if err != nil {
		log.Error("baton: stopped", "err", err)
		os.Exit(1)
	}
}

// runMain is Main up to its exit: it runs until ctx ends or one of sigs
// comes, and returns when the instance has stopped, or at once with
// errExitNow at a second one of sigs. stopped is closed once Run has
// returned and the backend is closed (later than runMain's return only
// after errExitNow).
func runMain(ctx context.Context, cfg Config, sigs ...os.Signal) (stopped <-chan struct{}, err error) {
	done := make(chan struct{})
	shutdown := tracing.Shutdown(func(context.Context) error { return nil })
	if cfg.Advanced.TracerProvider == nil {
		tp, sd, err := tracing.FromEnv(ctx)
		if err != nil {
			close(done)
			return done, err
		}
		cfg.Advanced.TracerProvider, shutdown = tp, sd
	}
	b, err := New(cfg)
	if err != nil {
		_ = shutdown(context.Background())
		close(done)
		return done, err
	}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, sigs...)
	defer signal.Stop(ch)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errc := make(chan error, 1)
	go func() {
		defer close(done)
		err := b.Run(ctx)
		sctx, cancel := context.WithTimeout(context.Background(), tracing.FlushTimeout)
		_ = shutdown(sctx) // Run flushed the spans already
		cancel()
		if c, ok := cfg.Backend.(io.Closer); ok {
			if cerr := c.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("baton: closing the backend: %w", cerr)
			}
		}
		errc <- err
	}()
	for seen := 0; ; {
		select {
		case err := <-errc:
			return done, err
		case s := <-ch:
			if seen++; seen == 2 {
				return done, errExitNow
			}
			cancel(fmt.Errorf("baton: %v", s))
		}
	}
}
