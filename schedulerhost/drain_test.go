package schedulerhost_test

// Tests of the drain (drain.go): how a term ends on a graceful stop and on
// a loss, and what becomes of a run it abandons.

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// overlapLog records every run of one job: which term started it, its
// tick, and how many runs of the job were going at once.
type overlapLog struct {
	mu       sync.Mutex
	going    int            // runs going now, any term
	byTerm   map[uint64]int // runs going now, by token
	maxGoing int
	twice    []string // runs started while another of the same term was going
	ticks    []time.Time
	tokens   []uint64
}

func (o *overlapLog) start(ctx context.Context) {
	tok, _ := election.TokenFromContext(ctx)
	tk, _ := schedulerhost.TickFromContext(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byTerm == nil {
		o.byTerm = map[uint64]int{}
	}
	o.going++
	o.byTerm[tok]++
	o.maxGoing = max(o.maxGoing, o.going)
	if o.byTerm[tok] > 1 {
		o.twice = append(o.twice, fmt.Sprintf("term %d: tick %s started while %d of its runs were going", tok, tk.Time.Format("15:04:05"), o.byTerm[tok]-1))
	}
	o.ticks = append(o.ticks, tk.Time)
	o.tokens = append(o.tokens, tok)
}

func (o *overlapLog) end(ctx context.Context) {
	tok, _ := election.TokenFromContext(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.going--
	o.byTerm[tok]--
}

// An abandoned run (it ignored its cancellation, the drain gave up) that
// returns while the same Host leads again must not count as one of the
// new term's runs: the overlap policy of the new term keeps holding, and
// the abandoned run itself is an earlier run of the job still going.
func TestHost_AbandonedRunDoesNotCorruptTheNextTerm(t *testing.T) {
	for _, policy := range []schedulerhost.Overlap{schedulerhost.OverlapSkip, schedulerhost.OverlapQueue} {
		t.Run(string(policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var o overlapLog
				release := make(chan struct{})
				first := true
				var firstMu sync.Mutex
				h, err := schedulerhost.New(schedulerhost.Config{Logger: quiet, ShutdownTimeout: 2 * time.Second, KillGrace: time.Second,
					Jobs: []schedulerhost.Job{{
						Name: "j", Schedule: "@every 1s", Overlap: policy,
						Run: func(ctx context.Context) error {
							o.start(ctx)
							defer o.end(ctx)
							firstMu.Lock()
							deaf := first
							first = false
							firstMu.Unlock()
							if deaf {
								<-release // ignores its context
								return nil
							}
							time.Sleep(2500 * time.Millisecond)
							return nil
						},
					}}})
				if err != nil {
					t.Fatal(err)
				}
				// Term 1: the first run ignores its context; the drain gives
				// up on it.
				ctx1, stop1 := context.WithCancel(context.Background())
				done1 := make(chan error, 1)
				go func() { done1 <- h.Lead(ctx1, election.NewTerm(context.Background(), 1)) }()
				time.Sleep(1500 * time.Millisecond)
				stop1()
				if err := <-done1; err == nil {
					t.Fatal("term 1: Lead returned nil with a run still going")
				}
				if h.Abandoned() != 1 {
					t.Fatalf("Abandoned() = %d after term 1, want 1", h.Abandoned())
				}
				// Term 2 on the same Host; the abandoned run returns during it.
				ctx2, stop2 := context.WithCancel(context.Background())
				done2 := make(chan error, 1)
				go func() { done2 <- h.Lead(ctx2, election.NewTerm(context.Background(), 2)) }()
				time.Sleep(1200 * time.Millisecond)
				close(release)
				time.Sleep(10 * time.Second)
				stop2()
				if err := <-done2; err != nil {
					t.Errorf("term 2: Lead: %v", err)
				}
				synctest.Wait()

				o.mu.Lock()
				defer o.mu.Unlock()
				for _, s := range o.twice {
					t.Errorf("%s: two runs of one term at once under %s", s, policy)
				}
				if o.maxGoing != 1 {
					t.Errorf("at most %d runs of the job were going at once, want 1 (%s, the abandoned run included)", o.maxGoing, policy)
				}
				seen := map[time.Time]bool{}
				var term2 []time.Time
				for i, tk := range o.ticks {
					if seen[tk] {
						t.Errorf("tick %v ran twice", tk)
					}
					seen[tk] = true
					if o.tokens[i] == 2 {
						term2 = append(term2, tk)
					}
				}
				if len(term2) < 3 {
					t.Errorf("term 2 ran %d ticks (%v), want at least 3", len(term2), term2)
				}
				for i := 1; i < len(term2); i++ {
					if !term2[i].After(term2[i-1]) {
						t.Errorf("term 2 ran tick %v after %v: out of order", term2[i], term2[i-1])
					}
				}
				if n := h.Running(); n != 0 {
					t.Errorf("Running() = %d at the end, want 0", n)
				}
			})
		})
	}
}
