package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/tracing"
)

// The runner: one owner for everything an instance runs while Run lasts,
// in the shape of oklog/run's Group. Each part is an actor, a function
// that blocks until it is done, on a goroutine of its own; when the first
// returns (the shutdown watch once ctx ends, or a part that failed) the
// runner interrupts every actor and waits for all of them. The parts are
// the Elector (Elector.Run with Host.Lead as its lead function), the
// registry publisher (with a control store), the absence poll (absence.go),
// the audit poll (auditpoll.go), the application watch (with Advanced.App), the reload at
// Advanced.ReloadSignals, and the HTTP server (RunServing). The HTTP API's verdicts learn from the runner
// whether the election loop runs (httpapi.API.SetLoopAlive) and when the
// shutdown began (SetStopping).

// ErrRunTwice is the error of Run and RunServing when either was called
// before: an instance runs once. The refused call changes nothing of the
// first one, and closes the listener it was given.
var ErrRunTwice = errors.New("baton: Run called twice: an instance runs once")

// errStopped is the cause of the runner's context once one of its actors
// returned without an error.
var errStopped = errors.New("baton: stopped")

// actor is one part of a run: execute blocks until the part is done;
// interrupt asks it to return soon, and does not block.
type actor struct {
	execute   func() error
	interrupt func(error)
}

// runActors runs each actor on a goroutine of its own until the first
// returns, then interrupts every one with that one's error (nil when it
// returned none) and waits for all. It returns the first error an actor
// returned, nil if none did.
func runActors(actors []actor) error {
	errc := make(chan error, len(actors))
	for _, a := range actors {
		go func() { errc <- a.execute() }()
	}
	err := <-errc
	for _, a := range actors {
		a.interrupt(err)
	}
	for range len(actors) - 1 {
		if e := <-errc; err == nil {
			err = e
		}
	}
	return err
}

// runner is what Run runs beside the Elector, as New configured it.
type runner struct {
	publish       bool        // a control store: publish in the registry
	watchApp      bool        // Advanced.App: run the application's checks
	reloadSignals []os.Signal // Advanced.ReloadSignals
	log           *slog.Logger
	absence       *absencePoll // nil: no job has a Deadline and the backend cannot say who leads (absence.go)
	audit         *auditPoll   // nil: no control store, or Advanced.AuditPollInterval negative (auditpoll.go)
	flush         any          // Advanced.TracerProvider: its spans are flushed when Run returns
}

// flushSpans flushes the spans of p, if it can (the SDK's provider can),
// for at most tracing.FlushTimeout.
func flushSpans(p any, log *slog.Logger) {
	f, ok := p.(interface{ ForceFlush(context.Context) error })
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracing.FlushTimeout)
	defer cancel()
	if err := f.ForceFlush(ctx); err != nil {
		log.Warn("tracing: spans not flushed", "err", err)
	}
}

// runGroup is Run and RunServing (ln nil for Run): the runner.
func (b *Baton) runGroup(ctx context.Context, ln net.Listener) error {
	if !b.started.CompareAndSwap(false, true) {
		if ln != nil {
			_ = ln.Close()
		}
		return ErrRunTwice
	}
	defer flushSpans(b.run.flush, b.run.log)
	gctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	interrupt := func(err error) {
		if err == nil {
			err = errStopped
		}
		stop(err)
	}
	electorDone := make(chan struct{})
	b.api.SetLoopAlive(true)
	actors := []actor{
		{func() error {
			defer close(electorDone)
			defer b.api.SetLoopAlive(false)
			return b.elector.Run(gctx, b.host.Lead)
		}, interrupt},
		{func() error { // the shutdown watch: the first to return when ctx ends
			<-gctx.Done()
			b.api.SetStopping()
			if ctx.Err() != nil {
				b.run.log.Info("shutting down: draining runs, then releasing", "reason", context.Cause(ctx), "running", b.host.Running())
			}
			return nil
		}, interrupt},
	}
	if b.run.publish {
		actors = append(actors, actor{func() error { b.api.Publish(gctx); return nil }, interrupt})
	}
	if b.run.absence != nil {
		actors = append(actors, actor{func() error { b.run.absence.run(gctx); return nil }, interrupt})
	}
	if b.run.audit != nil {
		actors = append(actors, actor{func() error { b.run.audit.run(gctx); return nil }, interrupt})
	}
	if b.run.watchApp {
		actors = append(actors, actor{func() error { b.api.WatchApp(gctx); return nil }, interrupt})
	}
	if len(b.run.reloadSignals) > 0 {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, b.run.reloadSignals...)
		defer signal.Stop(sigs)
		actors = append(actors, actor{func() error { b.api.ReloadOn(gctx, sigs); return nil }, interrupt})
	}
	if ln != nil {
		// The HTTP server answers through the drain (/readyz: shutting
		// down) and shuts down once the Elector has returned.
		actors = append(actors, actor{func() error { return serve(b.api.Handler(), ln, electorDone) }, func(error) {}})
	}
	return runActors(actors)
}

// serve serves h on ln until stop is closed (then shuts down gracefully
// within httpapi.HTTPShutdownTimeout) or serving fails. It blocks.
func serve(h http.Handler, ln net.Listener, stop <-chan struct{}) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-stop:
	}
	ctx, cancel := context.WithTimeout(context.Background(), httpapi.HTTPShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(ctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("http: shutdown: %w", err)
	}
	return nil
}
