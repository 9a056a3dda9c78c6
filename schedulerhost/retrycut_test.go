package schedulerhost_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// cutOnList is a control store that, once armed, cuts the node's path
// at its next read of the pauses and answers that List only when its context ends (a
// read that hangs until the term is over).
type cutOnList struct {
	control.Store
	armed atomic.Bool
	cut   atomic.Pointer[func()]
}

func (s *cutOnList) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	// Only a read of the pauses: the run-now requests are polled too.
	if strings.HasPrefix(prefix, "pause/") && s.armed.CompareAndSwap(true, false) {
		if cut := s.cut.Load(); cut != nil {
			(*cut)()
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Store.List(ctx, prefix)
}

// A failed run whose next attempt is not started because its term ended
// (in the backoff, during the pause read before the retry, or by a
// shutdown) is recorded as failed, with its attempts, and with the text
// by which the accounting tells a retry cut short: audit.Classify makes
// it lost, retry-cut, not a tick that ran and failed.
func TestHost_RetryCutByTheTermIsLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		// end ends the term once the first attempt failed at 1m.
		end func(n *node, ctl *cutOnList)
		// backoff is the job's RetryBackoff.
		backoff time.Duration
	}{
		{"loss in the backoff", func(n *node, _ *cutOnList) { n.backend.Cut() }, 10 * time.Second},
		{"loss in the pause read", func(n *node, ctl *cutOnList) {
			cut := n.backend.Cut
			ctl.cut.Store(&cut)
			ctl.armed.Store(true)
		}, time.Second},
		{"shutdown in the backoff", func(n *node, _ *cutOnList) { n.cancel() }, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemory()
				ctl := &cutOnList{Store: m.Control()}
				var a attempts
				failed := make(chan struct{}, 1)
				n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, ShutdownTimeout: time.Minute, Jobs: []schedulerhost.Job{{
					Name: "flaky", Schedule: "0 * * * * *", Retries: 2, RetryBackoff: tc.backoff,
					Run: func(ctx context.Context) error {
						if a.add(ctx) == 1 {
							failed <- struct{}{}
						}
						return errors.New("connection reset by peer")
					},
				}}})
				<-failed
				synctest.Wait() // the run is in its backoff
				tc.end(n, ctl)
				time.Sleep(30 * time.Second) // the term's 5 s TTL, and more
				hist, err := m.Ledger().History(context.Background(), "flaky", 10)
				n.backend.Heal()
				n.stop(t)
				if err != nil || len(hist) != 1 {
					t.Fatalf("history %+v, %v; want one run", hist, err)
				}
				h := hist[0]
				if a.count() != 1 || h.Result != ledger.ResultFailed || h.Attempts != 1 ||
					!strings.HasPrefix(h.Error, "connection reset by peer "+audit.ErrTextRetryCut+": ") || !strings.HasSuffix(h.Error, ")") {
					t.Errorf("%d attempts, history entry %+v; want 1, failed, 1 attempt, Error %q then the cause",
						a.count(), h, "connection reset by peer "+audit.ErrTextRetryCut+": ")
				}
				if c, r := audit.Classify(h); c != audit.Lost || r != audit.ReasonRetryCut {
					t.Errorf("Classify(%q) = %s/%s, want %s/%s", h.Error, c, r, audit.Lost, audit.ReasonRetryCut)
				}
			})
		})
	}
}
