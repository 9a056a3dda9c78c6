package etcd_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/etcdtest"
)

// Crash failover (design guarantee 7): when the leader vanishes without
// releasing (kill -9: its connections drop, its lease is not revoked), a
// waiting candidate leads once the server expires the lease, within
// TTL + 1 s of the crash. Measured over a few trials; the bound asserted
// is generous, the figures are logged.
func TestCrashFailover(t *testing.T) {
	const ttl = 2 * time.Second
	pfx := prefix(t)
	b := newBackend(t, dial(t, server(t).Addr()), pfx, ttl)
	var worst time.Duration
	for i := range 3 {
		acli, aproxy := proxied(t)
		a := newBackend(t, acli, pfx, ttl)
		la := backendtest.Acquire(t, a, "a", acquireWithin)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ch := make(chan election.Lease, 1)
		go func() {
			l, err := b.Acquire(ctx, election.Identity{ID: "b"})
			if err != nil {
				t.Errorf("b: Acquire: %v", err)
			}
			ch <- l
		}()
		time.Sleep(time.Duration(i) * ttl / 5) // crash at a different phase of the renew cycle
		aproxy.Close()                         // the leader's process is gone
		crashed := time.Now()
		lb := <-ch
		cancel()
		if lb == nil {
			t.FailNow()
		}
		took := time.Since(crashed)
		worst = max(worst, took)
		t.Logf("trial %d: b led %v after the leader crashed", i, took.Round(time.Millisecond))
		if took > 2*ttl+time.Second {
			t.Errorf("failover took %v, want well under 2*TTL+1s", took)
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = la.Release(rctx) // stops a's goroutines; the server cannot be told
		rcancel()
		backendtest.Release(t, lb)
	}
	t.Logf("crash failover with TTL %v: worst %v (design bound TTL+1s = %v)", ttl, worst.Round(time.Millisecond), ttl+time.Second)
}

// Across a server restart the term goes on: while the server shuts down
// (etcd serves the streams already open for a few seconds, and accepts no
// new ones) the lease's keepalive stream keeps renewing; when the server
// closes it, the next renewal opens another as soon as the server is back.
// (Before, each renewal needed a new stream, and the term ended during the
// shutdown.)
func TestLease_RenewsAcrossServerRestart(t *testing.T) {
	srv := etcdtest.Start(t)
	timing := election.Timing{TTL: 6 * time.Second, RenewInterval: time.Second, SafetyMargin: time.Second}
	logs := &lines{}
	b, err := etcd.New(etcd.Config{Client: dial(t, srv.Addr()), Prefix: prefix(t), Timing: timing,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	l := backendtest.Acquire(t, b, "a", acquireWithin)
	defer backendtest.Release(t, l)
	time.Sleep(timing.RenewInterval + timing.RenewInterval/2) // one renewal on the stream
	start := time.Now()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	t.Logf("server restarted in %v", restarted.Sub(start).Round(time.Millisecond))
	select {
	case <-l.Done():
		t.Fatalf("term ended across the restart: %v; logs:\n%s", l.Err(), logs)
	case <-time.After(3 * timing.RenewInterval):
	}
	// Renewed since the restart: the deadline is past where a renewal
	// before it could have put it.
	if d := l.(driver.Deadliner).Deadline(); !d.After(restarted.Add(timing.TTL - timing.SafetyMargin - timing.RenewInterval)) {
		t.Errorf("deadline %v from now: no renewal since the restart", time.Until(d).Round(time.Millisecond))
	}
	if !logs.contains("keepalive stream failed, opening another") {
		t.Errorf("the keepalive stream was not replaced; logs:\n%s", logs)
	}
	held, why := keyHeld(t, dial(t, srv.Addr()), l)
	switch {
	case held:
	case l.Err() != nil:
		t.Errorf("key not held (%s): the term ended %v after the restart: %v; logs:\n%s",
			why, time.Since(restarted).Round(time.Millisecond), l.Err(), logs)
	default:
		t.Errorf("key not held (%s) %v after the restart while the term is live; logs:\n%s",
			why, time.Since(restarted).Round(time.Millisecond), logs)
	}
}
