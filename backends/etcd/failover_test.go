package etcd_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/schedulerhost/hosttest"
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
		la := electiontest.Acquire(t, a, "a", acquireWithin)
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
		electiontest.Release(t, lb)
	}
	t.Logf("crash failover with TTL %v: worst %v (design bound TTL+1s = %v)", ttl, worst.Round(time.Millisecond), ttl+time.Second)
}

// Once per tick across a crash, under each misfire policy, and a deposed
// leader's refused claim (issue: once per tick), on embedded etcd.
func TestFailoverConformance(t *testing.T) {
	admin := dial(t, server(t).Addr())
	hosttest.RunFailoverConformance(t, hosttest.Harness{
		// A wide safety margin leaves 3.5 s between the crashed leader's
		// local deadline and the lease's expiry on the server, so the
		// misfire policies can be told apart; the TTL of 6 s leaves a
		// renewal 1.5 s (at TTL 4 s, 0.5 s was missed under ci-loaded, and a
		// leader that lost its term and led again ran a second catch-up).
		Timing: election.Timing{TTL: 6 * time.Second, RenewInterval: time.Second, SafetyMargin: 3500 * time.Millisecond},
		NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) electiontest.Candidate {
			pfx := prefix(t)
			return func(t *testing.T, name string) electiontest.Candidate {
				cli, p := proxied(t)
				b, err := etcd.New(etcd.Config{Client: cli, Prefix: pfx, Timing: timing})
				if err != nil {
					t.Fatal(err)
				}
				return electiontest.Candidate{Backend: b, Cut: p.Blackhole, Heal: p.Heal, Ledger: b.Ledger(),
					Depose: func(t *testing.T, l election.Lease) {
						// As an operator would: etcdctl lease revoke <id>.
						_, id, ok := etcd.LeaseKey(l)
						if !ok {
							t.Fatalf("depose: %T is not an etcd lease", l)
						}
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						if _, err := admin.Revoke(ctx, id); err != nil {
							t.Fatalf("depose: revoke lease %x: %v", id, err)
						}
					}}
			}
		},
	})
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
	l := electiontest.Acquire(t, b, "a", acquireWithin)
	defer electiontest.Release(t, l)
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
	if d := l.(election.Deadliner).Deadline(); !d.After(restarted.Add(timing.TTL - timing.SafetyMargin - timing.RenewInterval)) {
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

// The operators' actions a Host acknowledged are honoured across lost
// answers (issue 28), on embedded etcd.
func TestHostControl(t *testing.T) {
	hosttest.RunControlConformance(t, hosttest.ControlHarness{
		NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) hosttest.ControlCandidate {
			pfx := prefix(t)
			return func(t *testing.T, name string) hosttest.ControlCandidate {
				cli, p := proxied(t)
				b, err := etcd.New(etcd.Config{Client: cli, Prefix: pfx, Timing: timing})
				if err != nil {
					t.Fatal(err)
				}
				return hosttest.ControlCandidate{Candidate: electiontest.Candidate{Backend: b, Cut: p.Blackhole, Heal: p.Heal, Ledger: b.Ledger()},
					Control: b.Control(), Proxy: p}
			}
		},
	})
}
