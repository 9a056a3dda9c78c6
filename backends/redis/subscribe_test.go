package redis_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// A candidate whose subscription connection hangs (it was dialed to a
// server that a partition has since cut off, as a Sentinel client's can be
// just before a promotion) still campaigns: it polls, and leads once the
// lease is free, instead of waiting for the subscription forever.
func TestAcquire_HungSubscriptionStillCampaigns(t *testing.T) {
	e := electionName(t)
	hole := proxy(t)
	hole.Blackhole()
	var arm atomic.Bool
	direct := server(t).Addr()
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if arm.CompareAndSwap(true, false) {
			addr = hole.Addr() // the next connection hangs: the subscription's
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	timing := election.Timing{TTL: 2 * time.Second}
	a := newBackend(t, redis.Config{Election: e, Timing: timing})
	b := newBackend(t, redis.Config{Addr: direct, Election: e, Timing: timing, Dialer: dial})
	la := backendtest.Acquire(t, a, "a", acquireWithin)
	arm.Store(true)
	got := acquireAsync(t, b, "b")
	time.Sleep(500 * time.Millisecond)
	if arm.Load() {
		t.Fatal("b's Acquire dialed no connection")
	}
	released := time.Now()
	if err := la.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("a: Release: %v", err)
	}
	r := <-got
	if r.l == nil {
		t.Fatalf("b did not lead within %v of a's release (its subscription hung)", acquireWithin)
	}
	defer r.l.Release(ctxT(t, 5*time.Second))
	if d := r.at.Sub(released); d > timing.TTL {
		t.Errorf("b led %v after a's release, want within the TTL %v", d, timing.TTL)
	}
	t.Logf("b led %v after a's release, its subscription hung", r.at.Sub(released).Round(time.Millisecond))
}
