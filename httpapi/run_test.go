package httpapi

import (
	"context"
	"sync"
)

// runAPI runs a's Elector with a's Host's Lead until ctx ends and it
// returned, with Publish (with a Control store) and WatchApp (with an
// App) beside it, and tells the verdicts as the runner of package baton
// does (SetLoopAlive, SetStopping). It stands in for that runner, which
// these tests cannot import, and returns Elector.Run's error.
func runAPI(ctx context.Context, a *API) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if a.cfg.Control != nil {
		wg.Go(func() { a.Publish(ctx) })
	}
	if a.cfg.App != nil {
		wg.Go(func() { a.WatchApp(ctx) })
	}
	wg.Go(func() {
		<-ctx.Done()
		a.SetStopping()
	})
	a.SetLoopAlive(true)
	err := a.cfg.Elector.Run(ctx, a.cfg.Host.Lead)
	a.SetLoopAlive(false)
	cancel()
	wg.Wait()
	return err
}
