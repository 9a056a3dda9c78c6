package baton

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Main is a program's whole life as one instance: New, then Run until
// SIGINT or SIGTERM (the runs in flight drain, the lease is released),
// then Close of cfg.Backend if it has one (etcd.Config.Endpoints,
// redis). It returns after a clean stop. If New or Run fails, it logs
// the error to cfg.Logger (nil: slog.Default()) and exits with status 1.
// It serves no HTTP; for /healthz and /metrics use New, Handler and Run.
func Main(cfg Config) {
	if err := runMain(context.Background(), cfg, syscall.SIGINT, syscall.SIGTERM); err != nil {
		log := cfg.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Error("baton: stopped", "err", err)
		os.Exit(1)
	}
}

// runMain is Main up to its exit: it runs until ctx ends or one of sigs
// comes.
func runMain(ctx context.Context, cfg Config, sigs ...os.Signal) error {
	b, err := New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, sigs...)
	defer stop()
	err = b.Run(ctx)
	if c, ok := cfg.Backend.(io.Closer); ok {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("baton: closing the backend: %w", cerr)
		}
	}
	return err
}
