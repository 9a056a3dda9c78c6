package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// The failure cases of the Redis lock articles in /work/shared/seeds
// (redis-single-scheduler.txt, redis-lock-renewal.txt), as tests.

var seedTiming = election.Timing{TTL: 2 * time.Second}

// acquireAsync starts b's Acquire and returns the lease and the instant
// it was won.
func acquireAsync(t *testing.T, b *redis.Backend, id string) <-chan struct {
	l  election.Lease
	at time.Time
} {
	ch := make(chan struct {
		l  election.Lease
		at time.Time
	}, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), acquireWithin)
		defer cancel()
		l, err := b.Acquire(ctx, election.Identity{ID: id})
		if err != nil {
			t.Errorf("%s: Acquire: %v", id, err)
		}
		ch <- struct {
			l  election.Lease
			at time.Time
		}{l, time.Now()}
	}()
	return ch
}

// (a) The lock expires while the job runs (the holder is paused, or cut
// off: its renewals stop). Its term ends before anyone else can lead.
func TestSeed_LockExpiresWhileJobRuns(t *testing.T) {
	e := electionName(t)
	pa := proxy(t)
	a := newBackend(t, redis.Config{Addr: pa.Addr(), Election: e, Timing: seedTiming})
	b := newBackend(t, redis.Config{Election: e, Timing: seedTiming})
	for trial := range 3 {
		la := backendtest.Acquire(t, a, "a", acquireWithin)
		got := acquireAsync(t, b, "b")
		time.Sleep(time.Duration(trial) * seedTiming.TTL / 5)
		pa.Blackhole() // the job runs on; renewals no longer arrive
		cut := time.Now()
		<-la.Done()
		aEnded := time.Now()
		r := <-got
		if r.l == nil {
			t.FailNow()
		}
		if !r.at.After(aEnded) {
			t.Errorf("trial %d: b led at %v after the cut, before a's term ended at %v", trial, r.at.Sub(cut), aEnded.Sub(cut))
		}
		if !errors.Is(la.Err(), election.ErrLeadershipLost) {
			t.Errorf("a's Err = %v, want ErrLeadershipLost", la.Err())
		}
		t.Logf("trial %d: a's term ended %v after the cut, b led %v after it (%v later)", trial,
			aEnded.Sub(cut).Round(time.Millisecond), r.at.Sub(cut).Round(time.Millisecond), r.at.Sub(aEnded).Round(time.Millisecond))
		rctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = la.Release(rctx)
		cancel()
		pa.Heal()
		backendtest.Release(t, r.l)
	}
}

// (b) An operator deletes the lock (redis-cli DEL), or another process
// overwrites it: the holder learns it at once, its term's context ends
// with a cause wrapping ErrLeadershipLost (and ErrKeyGone).
func TestSeed_HolderLearnsKeyDeleted(t *testing.T) {
	adm := admin(t)
	for _, tc := range []struct {
		name  string
		other func(t *testing.T, key string)
		bound time.Duration
	}{
		// Alone, the DEL is seen by the watch's next read (RenewInterval/2)
		// or the next renewal.
		{"DEL", func(t *testing.T, key string) {
			if err := adm.Del(ctxT(t, time.Second), key).Err(); err != nil {
				t.Fatal(err)
			}
		}, seedTiming.TTL / 3},
		// Overwritten by hand.
		{"SET", func(t *testing.T, key string) {
			if err := adm.Set(ctxT(t, time.Second), key, "999 x {}", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}, seedTiming.TTL / 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, redis.Config{Election: electionName(t), Timing: seedTiming})
			el, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: "a"}})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(context.Background())
			terms := make(chan context.Context, 4)
			done := make(chan error, 1)
			go func() {
				done <- el.Run(runCtx, func(ctx context.Context, term election.Term) error {
					terms <- term.Context()
					<-ctx.Done() // the job runs until the term ends
					return nil
				})
			}()
			defer func() {
				stop()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("Run: %v", err)
				}
			}()
			ctx := <-terms
			time.Sleep(100 * time.Millisecond)
			at := time.Now()
			tc.other(t, b.LeaseKey())
			select {
			case <-ctx.Done():
			case <-time.After(tc.bound + 500*time.Millisecond):
				t.Fatalf("term still live %v after the %s", time.Since(at), tc.name)
			}
			took := time.Since(at)
			cause := context.Cause(ctx)
			if !errors.Is(cause, election.ErrLeadershipLost) || !errors.Is(cause, redis.ErrKeyGone) {
				t.Errorf("cause = %v, want ErrLeadershipLost and ErrKeyGone", cause)
			}
			if took > tc.bound {
				t.Errorf("term ended %v after the %s, want within %v", took, tc.name, tc.bound)
			}
			t.Logf("term ended %v after the %s: %v", took.Round(time.Millisecond), tc.name, cause)
		})
	}
}

// (c) A graceful stop releases at once: the follower leads within
// milliseconds, not after the TTL.
func TestSeed_GracefulStopHandsOverAtOnce(t *testing.T) {
	e := electionName(t)
	a := newBackend(t, redis.Config{Election: e, Timing: election.Timing{TTL: 10 * time.Second}})
	b := newBackend(t, redis.Config{Election: e, Timing: election.Timing{TTL: 10 * time.Second}})
	var worst time.Duration
	for range 5 {
		la := backendtest.Acquire(t, a, "a", acquireWithin)
		got := acquireAsync(t, b, "b")
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		backendtest.Release(t, la)
		r := <-got
		if r.l == nil {
			t.FailNow()
		}
		worst = max(worst, r.at.Sub(start))
		backendtest.Release(t, r.l)
	}
	t.Logf("handover after release, TTL 10s: worst of 5 %v", worst.Round(100*time.Microsecond))
	if worst > 200*time.Millisecond {
		t.Errorf("handover took %v, want milliseconds", worst)
	}
}
