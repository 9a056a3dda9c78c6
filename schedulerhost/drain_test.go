package schedulerhost_test

// Tests of the drain (drain.go): how a term ends on a graceful stop and on
// a loss.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

func TestHost_GracefulStop_WaitsForRunAndStartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var st starts
		var ended atomic.Int64
		var sawCancel atomic.Bool
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: []schedulerhost.Job{{
			Name: "work", Schedule: "@every 1s", Overlap: schedulerhost.OverlapAllow,
			Run: func(ctx context.Context) error {
				st.add(ctx)
				select {
				case <-time.After(3 * time.Second):
				case <-ctx.Done():
					sawCancel.Store(true)
				}
				ended.Add(1)
				return nil
			},
		}}})
		t0 := time.Now()
		time.Sleep(1500 * time.Millisecond) // the 1s run is going
		startsAtStop := st.count()
		if startsAtStop != 1 {
			t.Fatalf("starts before stop = %d, want 1", startsAtStop)
		}
		n.cancel()
		err := <-n.done
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := time.Since(t0); got != 4*time.Second {
			t.Errorf("Run returned after %v, want 4s (the run started at 1s takes 3s)", got)
		}
		if st.count() != startsAtStop {
			t.Errorf("%d runs started after the stop", st.count()-startsAtStop)
		}
		if sawCancel.Load() {
			t.Error("the run's context was cancelled during a graceful drain")
		}
		if ended.Load() != 1 {
			t.Errorf("runs ended = %d, want 1", ended.Load())
		}
		if _, err := m.Leader(context.Background()); !errors.Is(err, election.ErrNoLeader) {
			t.Errorf("after Run returned, the lease is still held: %v", err)
		}
	})
}

func TestHost_GracefulStop_TimeoutCancelsWithCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		cause := make(chan error, 1)
		n := startNode(t, m, "a", schedulerhost.Config{ShutdownTimeout: 10 * time.Second, Jobs: []schedulerhost.Job{{
			Name: "stuck", Schedule: "@every 1s",
			Run: func(ctx context.Context) error {
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return ctx.Err()
			},
		}}})
		time.Sleep(1500 * time.Millisecond)
		stopped := time.Now()
		n.cancel()
		c := <-cause
		if !errors.Is(c, schedulerhost.ErrShutdownTimeout) {
			t.Errorf("run's cause = %v, want ErrShutdownTimeout", c)
		}
		if got := time.Since(stopped); got != 10*time.Second {
			t.Errorf("run cancelled %v after the stop, want ShutdownTimeout (10s)", got)
		}
		if err := <-n.done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if got := time.Since(stopped); got != 10*time.Second {
			t.Errorf("Run returned %v after the stop, want 10s", got)
		}
	})
}

func TestHost_GracefulStop_KillGraceBoundsAStuckRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		release := make(chan struct{})
		n := startNode(t, m, "a", schedulerhost.Config{ShutdownTimeout: 4 * time.Second, KillGrace: 2 * time.Second,
			Jobs: []schedulerhost.Job{{
				Name: "deaf", Schedule: "@every 1s",
				Run: func(ctx context.Context) error {
					<-release // ignores its context
					return nil
				},
			}}})
		time.Sleep(1500 * time.Millisecond)
		stopped := time.Now()
		n.cancel()
		<-n.done
		if got := time.Since(stopped); got != 6*time.Second {
			t.Errorf("Run returned %v after the stop, want ShutdownTimeout+KillGrace = 6s", got)
		}
		if n.host.Running() != 1 || n.host.Abandoned() != 1 {
			t.Errorf("Running() = %d, Abandoned() = %d, want 1 and 1 (the deaf run)", n.host.Running(), n.host.Abandoned())
		}
		close(release)
		synctest.Wait()
		if n.host.Running() != 0 || n.host.Abandoned() != 0 {
			t.Errorf("Running() = %d, Abandoned() = %d after the run returned, want 0", n.host.Running(), n.host.Abandoned())
		}
	})
}

func TestHost_Loss_CancelsRunsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		type ended struct {
			at    time.Time
			cause error
		}
		ch := make(chan ended, 1)
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: []schedulerhost.Job{{
			Name: "long", Schedule: "@every 1s",
			Run: func(ctx context.Context) error {
				<-ctx.Done()
				ch <- ended{time.Now(), context.Cause(ctx)}
				return ctx.Err()
			},
		}}})
		time.Sleep(1500 * time.Millisecond)
		lostAt := time.Now()
		m.Revoke()
		e := <-ch
		if e.at != lostAt {
			t.Errorf("run cancelled %v after the loss, want at once", e.at.Sub(lostAt))
		}
		if !errors.Is(e.cause, election.ErrLeadershipLost) {
			t.Errorf("cause = %v, want ErrLeadershipLost", e.cause)
		}
		synctest.Wait()
		// The elector campaigns again and leads (nobody else is there).
		if !n.elector.IsLeader() {
			t.Error("elector did not lead again after the loss")
		}
		n.stop(t)
	})
}
