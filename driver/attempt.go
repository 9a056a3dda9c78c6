package driver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/batonhq/baton/election"
)

// ReportAttempt tells the caller of Acquire how one attempt went, as
// election.ReportAttempt: a backend that retries inside Acquire calls it
// with each failure it retries (the Elector logs it at Warn, at most once
// a minute for the same error, counts it, and reports a node not ready
// after election.AcquireFailingAfter in a row), and with nil for each
// attempt the store answered, a refusal because another candidate holds
// the election included (it ends a run of failures). Errors Acquire
// returns are not reported. It does not block.
func ReportAttempt(ctx context.Context, err error) { election.ReportAttempt(ctx, err) }

// StallBound is how long an attempt may wait for an answer before
// WatchAttempt reports it failed: the renew interval, at least a second.
func StallBound(t election.Timing) time.Duration { return max(t.RenewInterval, time.Second) }

// WatchAttempt watches an attempt inside Acquire that may wait for an
// answer for good (a request on a connection that never comes up, a
// network that drops every byte): each time every passes before stop is
// called, it reports a failed attempt through ctx (ReportAttempt). The
// error is what probe returns, called with a context bounded by every (a
// quick check that says why the store does not answer, such as "connection
// refused"); when probe is nil or returns nil, it is "WHAT: no answer
// within EVERY". stop ends the watch and waits for its goroutine; the
// attempt itself goes on as before.
func WatchAttempt(ctx context.Context, every time.Duration, what string, probe func(context.Context) error) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			var err error
			if probe != nil {
				pctx, pcancel := context.WithTimeout(wctx, every)
				err = probe(pctx)
				pcancel()
			}
			if wctx.Err() != nil {
				return
			}
			if err == nil {
				err = fmt.Errorf("%s: no answer within %v", what, every)
			}
			ReportAttempt(ctx, err)
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
