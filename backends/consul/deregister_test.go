package consul_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/proxytest"
)

// serfFailed is serf's MemberStatus "failed", as /v1/agent/members (and
// `consul members`) reports it.
const serfFailed = 4

// TestDeregister_NoSecondLeader is the production topology's routine
// clean-up: leader a reaches Consul through a client agent of its own;
// that agent is killed (-9), the server marks its node failed (the
// session survives that: it has no health checks), and the operator
// deregisters the node, with `consul force-leave` or a catalog
// deregister. Consul then deletes every session of the node, a's among
// them, while a, cut off from any agent, still leads until its local
// deadline. Follower b talks to the server. In every trial b must start
// leading only after a's term context was cancelled. Both candidates use
// the default Config.
//
// The "cut" trials take the worst phase instead: the node stays alive, a's
// path to its agent is cut right after a renewal was answered and the node
// is deregistered at once, so a has almost all of its window TTL -
// SafetyMargin left; once at the defaults, once with a 3 s window and
// LockDelay = MinLockDelay (3.3 s), the shortest Validate accepts.
func TestDeregister_NoSecondLeader(t *testing.T) {
	srv := sharedAgent(t)
	for i, how := range []string{"force-leave", "force-leave", "catalog-deregister"} {
		t.Run(fmt.Sprintf("kill-%d-%s", i, how), func(t *testing.T) { deregisterTrial(t, srv, how) })
	}
	t.Run("cut-catalog-deregister-defaults", func(t *testing.T) {
		deregisterWorstPhase(t, srv, election.Timing{}, 0)
	})
	short := election.Timing{RenewInterval: time.Second, SafetyMargin: 7 * time.Second}
	t.Run("cut-catalog-deregister-3s-window", func(t *testing.T) {
		deregisterWorstPhase(t, srv, short, consul.MinLockDelay(short))
	})
}

// runElector runs an Elector for b until the returned stop is called. For
// each term, the time its lead function started arrives on began, and the
// time its term context was cancelled on ended. stop waits for Run to
// return.
func runElector(t *testing.T, b *consul.Backend, id string) (began, ended <-chan time.Time, stop func()) {
	t.Helper()
	e, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: id, Host: "test"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryPeriod: 100 * time.Millisecond, ReleaseTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	bc, ec := make(chan time.Time, 8), make(chan time.Time, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, func(ctx context.Context, _ election.Term) error {
			bc <- time.Now()
			<-ctx.Done()
			ec <- time.Now()
			return nil
		})
	}()
	return bc, ec, func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("%s: Elector.Run did not return within 15s of its ctx being cancelled", id)
		}
	}
}

func deregisterTrial(t *testing.T, srv *consultest.Agent, how string) {
	client := consultest.StartTWith(t, consultest.Options{Join: srv.SerfLANAddr})
	node := client.NodeName
	admin := agentClient(t, srv, "", "")
	key := newKey(t)
	newBackend := func(a *consultest.Agent) *consul.Backend {
		return backendOn(t, agentClient(t, a, "", ""), key, nil)
	}
	aBegan, aEnded, stopA := runElector(t, newBackend(client), "a")
	defer stopA()
	select {
	case <-aBegan:
	case <-time.After(30 * time.Second):
		t.Fatal("a did not lead within 30s")
	}
	bBegan, _, stopB := runElector(t, newBackend(srv), "b")
	defer stopB()
	time.Sleep(500 * time.Millisecond) // b reaches its blocking query

	client.Kill()
	killed := time.Now()
	// The server notices the dead agent (failed), which leaves sessions
	// without health checks alone.
	waitFor(t, 30*time.Second, "the server to mark node "+node+" failed", func() bool {
		ms, err := admin.Agent().Members(false)
		if err != nil {
			return false
		}
		for _, m := range ms {
			if m.Name == node {
				return m.Status == serfFailed
			}
		}
		return false
	})
	failed := time.Now()
	select {
	case at := <-bBegan:
		t.Fatalf("b led %v after the kill, before any deregistration", at.Sub(killed))
	default:
	}

	dereg := time.Now()
	switch how {
	case "force-leave":
		out, err := exec.Command(srv.Binary, "force-leave", "-http-addr=http://"+srv.HTTPAddr, node).CombinedOutput()
		if err != nil {
			t.Fatalf("consul force-leave %s: %v\n%s", node, err, out)
		}
	case "catalog-deregister":
		if _, err := admin.Catalog().Deregister(&api.CatalogDeregistration{Node: node}, nil); err != nil {
			t.Fatalf("catalog deregister %s: %v", node, err)
		}
	}

	var aEnd, bStart time.Time
	timeout := time.After(2*consul.DefaultTTL + consul.MaxLockDelay)
	for aEnd.IsZero() || bStart.IsZero() {
		select {
		case aEnd = <-aEnded:
		case bStart = <-bBegan:
		case <-timeout:
			t.Fatalf("after the %s: a's term ended: %v, b led: %v (zero: not yet)", how, !aEnd.IsZero(), !bStart.IsZero())
		}
	}
	t.Logf("%s of %s: node failed %v after the kill; a's term context cancelled %v after the kill; b led %v after the %s, %v after a's term ended",
		how, node, failed.Sub(killed).Round(time.Millisecond), aEnd.Sub(killed).Round(time.Millisecond),
		bStart.Sub(dereg).Round(time.Millisecond), how, bStart.Sub(aEnd).Round(time.Millisecond))
	if !bStart.After(aEnd) {
		t.Errorf("two leaders: b led %v after the %s while a's term context was still live; a's term ended %v later",
			bStart.Sub(dereg).Round(time.Millisecond), how, aEnd.Sub(bStart).Round(time.Millisecond))
	}
}

// deregisterWorstPhase: a leads through a fault proxy in front of its
// (live) client agent; right after one of its renewals was answered, its
// path is cut and its node deregistered from the catalog, which deletes
// its session with almost a whole window of its term ahead. b, waiting on
// the server, must lead only after a's term ended.
func deregisterWorstPhase(t *testing.T, srv *consultest.Agent, timing election.Timing, lockDelay time.Duration) {
	client := consultest.StartTWith(t, consultest.Options{Join: srv.SerfLANAddr})
	node := client.NodeName
	admin := agentClient(t, srv, "", "")
	key := newKey(t)
	newBackend := func(c *api.Client) *consul.Backend {
		return backendOn(t, c, key, func(c *consul.Config) { c.Timing, c.LockDelay = timing, lockDelay })
	}
	p, err := proxytest.New(client.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ca, cb := agentClient(t, client, p.Addr(), ""), agentClient(t, srv, "", "")
	la := backendtest.Acquire(t, newBackend(ca), "a", 30*time.Second)
	defer func() { p.Heal(); backendtest.Release(t, la) }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*consul.DefaultTTL+consul.MaxLockDelay)
	defer cancel()
	ch := backendtest.AcquireAsync(ctx, newBackend(cb), "b")
	var r backendtest.Result
	got := false
	defer func() { // b's Acquire ends, and its lease with the trial
		cancel()
		if !got {
			r = <-ch
		}
		if r.Lease != nil {
			backendtest.Release(t, r.Lease)
		}
	}()
	time.Sleep(500 * time.Millisecond) // b reaches its blocking query

	// Wait for a renewal to be answered: the lease's deadline moves.
	dl := la.(driver.Deadliner)
	d0 := dl.Deadline()
	waitFor(t, 2*consul.DefaultTTL, "a renewal of a's session", func() bool { return dl.Deadline() != d0 })
	p.Blackhole()
	dereg := time.Now()
	if _, err := admin.Catalog().Deregister(&api.CatalogDeregistration{Node: node}, nil); err != nil {
		t.Fatalf("catalog deregister %s: %v", node, err)
	}
	left := dl.Deadline().Sub(dereg)

	var aEnd time.Time
	aDone := la.Done()
	for aEnd.IsZero() || r.At.IsZero() {
		select {
		case <-aDone:
			aEnd, aDone = time.Now(), nil
		case r = <-ch:
			got = true
			if r.Err != nil {
				t.Fatalf("b: Acquire: %v", r.Err)
			}
		case <-ctx.Done():
			t.Fatalf("after the deregistration: a's term ended: %v, b led: %v (false: not yet)", !aEnd.IsZero(), !r.At.IsZero())
		}
	}
	tm := timing.WithDefaults(consul.DefaultTTL)
	if lockDelay == 0 {
		lockDelay = tm.TTL
	}
	t.Logf("catalog deregister of live node %s right after a renewal (window %v, LockDelay %v): a had %v of its term left, its term ended %v after the deregistration; b led %v after it, %v after a's term ended",
		node, tm.TTL-tm.SafetyMargin, lockDelay, left.Round(time.Millisecond), aEnd.Sub(dereg).Round(time.Millisecond),
		r.At.Sub(dereg).Round(time.Millisecond), r.At.Sub(aEnd).Round(time.Millisecond))
	if !r.At.After(aEnd) {
		t.Errorf("two leaders: b led %v after the deregistration while a's term was still live; a's term ended %v later",
			r.At.Sub(dereg).Round(time.Millisecond), aEnd.Sub(r.At).Round(time.Millisecond))
	}
}
