package etcd_test

import (
	"context"
	"errors"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
)

// keyHeld reports whether l's key exists on the server under l's etcd
// lease, read through cli (a path of its own).
func keyHeld(t *testing.T, cli *clientv3.Client, l election.Lease) (bool, string) {
	t.Helper()
	key, id, ok := etcd.LeaseKey(l)
	if !ok {
		t.Fatalf("lease %T is not an etcd lease", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return false, key + " missing"
	}
	if got := clientv3.LeaseID(resp.Kvs[0].Lease); got != id {
		return false, key + " under another lease"
	}
	return true, key
}

func countKeys(t *testing.T, cli *clientv3.Client, pfx string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, pfx+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count %s: %v", pfx, err)
	}
	return resp.Count
}

// waitFor polls cond every 20 ms until it holds or fails t after d.
var waitFor = envtest.WaitFor

// etcd#19597: a campaign whose keepalives stop past the TTL (its lease
// expires on the server while it waits behind the leader) must never
// return a term without a live key; it fails, and the next campaign uses a
// fresh lease.
func TestAcquire_LeaseExpiresWhileCampaigning(t *testing.T) {
	pfx := prefix(t)
	check := dial(t, server(t).Addr())
	a := newBackend(t, dial(t, server(t).Addr()), pfx, 2*time.Second)
	bcli, bproxy := proxied(t)
	b := newBackend(t, bcli, pfx, 2*time.Second)

	la := backendtest.Acquire(t, a, "a", acquireWithin)
	defer backendtest.Release(t, la)

	type attempt struct {
		lease election.Lease
		err   error
		held  bool
		why   string
		at    time.Time
	}
	attempts := make(chan attempt, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { // campaign again and again, like an Elector
		defer close(attempts)
		for ctx.Err() == nil {
			l, err := b.Acquire(ctx, election.Identity{ID: "b"})
			if err != nil {
				attempts <- attempt{err: err, at: time.Now()}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			held, why := keyHeld(t, check, l) // at return time
			attempts <- attempt{lease: l, held: held, why: why}
			return
		}
	}()

	waitFor(t, 5*time.Second, "b's key", func() bool { return countKeys(t, check, pfx) == 2 })
	bproxy.Blackhole()
	cut := time.Now()
	// b's lease expires on the server: its key goes.
	waitFor(t, 10*time.Second, "b's key to expire", func() bool { return countKeys(t, check, pfx) == 1 })
	expired := time.Now()
	t.Logf("b's key expired on the server %v after the cut", expired.Sub(cut).Round(time.Millisecond))
	var r attempt
	select {
	case r = <-attempts:
	case <-time.After(5 * time.Second):
		// Seen once under ci-loaded: keep the goroutines and the time it
		// finally took, to find what held the campaign.
		var dump strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Logf("goroutines 5s after b's key expired:\n%s", dump.String())
		select {
		case r = <-attempts:
			t.Fatalf("b's Acquire failed only %v after the cut (%v after its key expired), want within 5s of the expiry: %v",
				r.at.Sub(cut).Round(time.Millisecond), r.at.Sub(expired).Round(time.Millisecond), r.err)
		case <-time.After(20 * time.Second):
			t.Fatal("b's Acquire did not fail within 25s after its lease ended")
		}
	}
	if r.lease != nil {
		t.Fatalf("b acquired while a led (key held: %v, %s)", r.held, r.why)
	}
	if !errors.Is(r.err, etcd.ErrCampaignLost) || !errors.Is(r.err, election.ErrLeadershipLost) {
		t.Errorf("b's Acquire error = %v, want ErrCampaignLost wrapping ErrLeadershipLost", r.err)
	}
	t.Logf("b's campaign ended %v after the cut: %v", r.at.Sub(cut).Round(time.Millisecond), r.err)
	bproxy.Heal()
	waitFor(t, 10*time.Second, "b's new key", func() bool { return countKeys(t, check, pfx) == 2 })
	if !backendtest.IsOpen(la) {
		t.Fatalf("a's term ended: %v", la.Err())
	}
	released := time.Now()
	backendtest.Release(t, la)

	for r := range attempts {
		if r.lease == nil {
			t.Logf("b's Acquire failed again: %v", r.err)
			continue
		}
		defer backendtest.Release(t, r.lease)
		if !r.held {
			t.Fatalf("b's Acquire returned a lease whose key is not held: %s", r.why)
		}
		if !backendtest.IsOpen(r.lease) {
			t.Fatalf("b's new term already ended: %v", r.lease.Err())
		}
		if r.lease.Token() <= la.Token() {
			t.Errorf("b's token %d <= a's %d", r.lease.Token(), la.Token())
		}
		t.Logf("b led %v after a released, with a fresh lease (token %d)", time.Since(released).Round(time.Millisecond), r.lease.Token())
		return
	}
	t.Fatal("b never acquired")
}

// The check after the campaign: when the leader's key and the waiting
// candidate's own key vanish in the same revision, the candidate sees the
// way clear but must not return a term.
func TestAcquire_OwnKeyDeletedWithLeaders(t *testing.T) {
	pfx := prefix(t)
	check := dial(t, server(t).Addr())
	a := newBackend(t, dial(t, server(t).Addr()), pfx, 2*time.Second)
	b := newBackend(t, dial(t, server(t).Addr()), pfx, 2*time.Second)
	for i := range 10 {
		la := backendtest.Acquire(t, a, "a", acquireWithin)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ch := backendtest.AcquireAsync(ctx, b, "b")
		waitFor(t, 5*time.Second, "b's key", func() bool { return countKeys(t, check, pfx) == 2 })
		resp, err := check.Txn(ctx).Then(clientv3.OpDelete(pfx+"/", clientv3.WithPrefix())).Commit()
		if err != nil || !resp.Succeeded {
			t.Fatalf("delete keys: %v", err)
		}
		r := <-ch
		cancel()
		if r.Lease != nil {
			held, why := keyHeld(t, check, r.Lease)
			backendtest.Release(t, r.Lease)
			t.Fatalf("trial %d: b acquired after its own key was deleted (held %v: %s)", i, held, why)
		}
		if !errors.Is(r.Err, etcd.ErrCampaignLost) {
			t.Errorf("trial %d: b's error = %v, want ErrCampaignLost", i, r.Err)
		}
		select {
		case <-la.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("trial %d: a's term did not end after its key was deleted", i)
		}
		if !errors.Is(la.Err(), etcd.ErrKeyGone) || !errors.Is(la.Err(), election.ErrLeadershipLost) {
			t.Errorf("trial %d: a's Err = %v, want ErrLeadershipLost wrapping ErrKeyGone", i, la.Err())
		}
		backendtest.Release(t, la)
	}
}

// Candidates of concurrency.Election (and so `etcdctl elect`) on the same
// prefix take part in the same election, and see baton's leader.
func TestAcquire_CompatibleWithConcurrencyElection(t *testing.T) {
	pfx := prefix(t)
	cli := dial(t, server(t).Addr())
	b := newBackend(t, dial(t, server(t).Addr()), pfx, 2*time.Second)

	s, err := concurrency.NewSession(cli, concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := concurrency.NewElection(s, pfx)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Campaign(ctx, "etcdctl-candidate"); err != nil {
		t.Fatal(err)
	}
	info, err := b.Leader(ctx)
	if err != nil || info.Identity.ID != "etcdctl-candidate" {
		t.Fatalf("Leader() = %+v, %v; want the concurrency candidate", info, err)
	}
	actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if l, err := b.Acquire(actx, election.Identity{ID: "baton"}); err == nil {
		l.Release(ctx)
		t.Fatal("baton acquired while a concurrency.Election candidate led")
	}
	acancel()
	ch := make(chan error, 1)
	var l election.Lease
	go func() {
		var err error
		l, err = b.Acquire(ctx, election.Identity{ID: "baton", Host: "h", PID: 7})
		ch <- err
	}()
	waitFor(t, 5*time.Second, "baton's key", func() bool { return countKeys(t, cli, pfx) == 2 })
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	defer backendtest.Release(t, l)
	resp, err := concurrency.NewElection(s, pfx).Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(resp.Kvs[0].Value), `{"id":"baton","host":"h","pid":7}`; got != want {
		t.Errorf("concurrency.Election.Leader value = %s, want %s", got, want)
	}
	if uint64(resp.Kvs[0].CreateRevision) != l.Token() {
		t.Errorf("leader key create revision %d != token %d", resp.Kvs[0].CreateRevision, l.Token())
	}
}
