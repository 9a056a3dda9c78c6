package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// parentLeads checks that parent, whose nested election is in the state
// that when describes, reports no leader, and that candidate p-1 then
// wins it within 2 s. It returns p-1's lease, the caller's to release.
func parentLeads(ctx context.Context, t *testing.T, parent *etcd.Backend, when string) election.Lease {
	t.Helper()
	if info, err := parent.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("parent: Leader() with no candidate of its own, %s = %+v, %v; want ErrNoLeader", when, info, err)
	}
	actx, acancel := context.WithTimeout(ctx, 2*time.Second)
	defer acancel()
	lp, err := parent.Acquire(actx, election.Identity{ID: "p-1"})
	if err != nil {
		t.Fatalf("parent: Acquire %s: %v", when, err)
	}
	return lp
}

// leaveLedgerKeys leads b as id, claims a tick of job "report" in b's
// ledger and releases: the ledger's keys, which have no lease, stay.
func leaveLedgerKeys(ctx context.Context, t *testing.T, b *etcd.Backend, id string) {
	t.Helper()
	l := backendtest.Acquire(t, b, id, acquireWithin)
	tick := time.Now().UTC().Truncate(time.Second)
	if err := b.Ledger().Claim(ctx, []ledger.Claim{{Job: "report", Tick: tick, Token: l.Token(), Instance: id, Started: time.Now()}})[0]; err != nil {
		t.Fatalf("%s: Claim: %v", id, err)
	}
	backendtest.Release(t, l)
}

// nestedElections returns a Backend of the election under a fresh prefix P
// (parent) and one of the election P/eu nested in it (child), each with a
// client of its own.
func nestedElections(t *testing.T) (parent, child *etcd.Backend) {
	pfx := prefix(t)
	parent = newBackend(t, dial(t, server(t).Addr()), pfx, 2*time.Second)
	child = newBackend(t, dial(t, server(t).Addr()), pfx+"/eu", 2*time.Second)
	return parent, child
}

// Elections may nest: P and P/eu are two elections. The candidates of
// P/eu (keys P/eu/<lease id>) are under P/ too, but they are not P's: P
// elects its own leader at once, and its Leader() never reports P/eu's.
func TestNested_ParentIgnoresNestedElection(t *testing.T) {
	parent, child := nestedElections(t)

	lc := backendtest.Acquire(t, child, "eu-1", acquireWithin)
	defer backendtest.Release(t, lc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lp := parentLeads(ctx, t, parent, "while the nested election has a leader")
	defer backendtest.Release(t, lp)
	if info, err := parent.Leader(ctx); err != nil || info.Identity.ID != "p-1" || info.Token != lp.Token() {
		t.Errorf("parent: Leader() = %+v, %v; want p-1 with token %d", info, err, lp.Token())
	}
	if info, err := child.Leader(ctx); err != nil || info.Identity.ID != "eu-1" || info.Token != lc.Token() {
		t.Errorf("child: Leader() = %+v, %v; want eu-1 with token %d", info, err, lc.Token())
	}
	if !backendtest.IsOpen(lc) || !backendtest.IsOpen(lp) {
		t.Errorf("a term ended: child %v, parent %v", lc.Err(), lp.Err())
	}
}

// A nested election's ledger (P/eu-ledger/...) is under P/ too; its keys
// have no lease and stay. They must not hold P's candidates back.
func TestNested_NestedLedgerDoesNotBlockParent(t *testing.T) {
	parent, child := nestedElections(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leaveLedgerKeys(ctx, t, child, "eu-1")

	lp := parentLeads(ctx, t, parent, "with the nested election's ledger in place")
	backendtest.Release(t, lp)
}

// The keys of a nested election and of its ledger, under P/ and older
// than P's leader's key, do not make P's claims stale: the ledger finds
// the term's key among P's own candidates.
func TestNested_ParentClaimsBesideNestedKeys(t *testing.T) {
	parent, child := nestedElections(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leaveLedgerKeys(ctx, t, child, "eu-1")
	lc := backendtest.Acquire(t, child, "eu-2", acquireWithin)
	defer backendtest.Release(t, lc)
	lp := backendtest.Acquire(t, parent, "p-1", acquireWithin)
	defer backendtest.Release(t, lp)
	tick := time.Now().UTC().Truncate(time.Second)
	if err := parent.Ledger().Claim(ctx, []ledger.Claim{{Job: "report", Tick: tick, Token: lp.Token(), Instance: "p-1", Started: time.Now()}})[0]; err != nil {
		t.Fatalf("parent's claim beside the nested election's keys: %v", err)
	}
}

// An election's ledger is PREFIX-ledger/, and its keys look like the
// candidates of an election PREFIX-ledger/<job> (PREFIX-ledger/<job>/last
// has no lease and stays): such a prefix is refused.
func TestNested_ElectionInsideLedgerRefused(t *testing.T) {
	pfx := prefix(t)
	owner := newBackend(t, dial(t, server(t).Addr()), pfx, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leaveLedgerKeys(ctx, t, owner, "owner")

	for _, p := range []string{pfx + "-ledger/report", pfx + "-ledger"} {
		b, err := etcd.New(etcd.Config{Client: dial(t, server(t).Addr()), Prefix: p})
		if err == nil {
			info, lerr := b.Leader(ctx)
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			l, aerr := b.Acquire(actx, election.Identity{ID: "intruder"})
			acancel()
			if aerr == nil {
				backendtest.Release(t, l)
			}
			t.Errorf("New accepted prefix %s, in the ledger of election %s: Leader() = %+v, %v; Acquire: %v", p, pfx, info, lerr, aerr)
			continue
		}
		if !strings.Contains(err.Error(), "ledger") {
			t.Errorf("New(%s) = %v; want an error saying why (the ledger)", p, err)
		}
		t.Logf("New(%s): %v", p, err)
	}
}

// More candidates than one read returns, between subtrees of nested
// elections that sort among them and were created before them all: the
// leader is the first candidate, a new candidate waits for every one of
// them, and the nested keys play no part.
func TestNested_ManyCandidatesBetweenSubtrees(t *testing.T) {
	pfx := prefix(t)
	cli := dial(t, server(t).Addr())
	b := newBackend(t, dial(t, server(t).Addr()), pfx, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nested := []string{"/a/1", "/k050/x", "/k120-ledger/job/last", "/zz/deep/er"}
	for _, k := range nested {
		if _, err := cli.Put(ctx, pfx+k, "nested"); err != nil {
			t.Fatal(err)
		}
	}
	const n = 300 // more than two reads' worth
	var direct []string
	for i := range n {
		k := fmt.Sprintf("%s/k%03d", pfx, i)
		if _, err := cli.Put(ctx, k, fmt.Sprintf("raw-%d", i)); err != nil {
			t.Fatal(err)
		}
		direct = append(direct, k)
	}
	if info, err := b.Leader(ctx); err != nil || info.Identity.ID != "raw-0" {
		t.Fatalf("Leader() = %+v, %v; want raw-0, the first candidate", info, err)
	}

	got := make(chan error, 1)
	var l election.Lease
	go func() {
		var err error
		l, err = b.Acquire(ctx, election.Identity{ID: "c"})
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Acquire returned (%v) while %d earlier candidates exist", err, n)
	case <-time.After(300 * time.Millisecond):
	}
	for i := 0; i < n; i += 100 { // the oldest last; at most 128 operations per transaction
		var ops []clientv3.Op
		for _, k := range direct[n-i-100 : n-i] {
			ops = append(ops, clientv3.OpDelete(k))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
		if i+100 < n {
			select {
			case err := <-got:
				t.Fatalf("Acquire returned (%v) while %d earlier candidates exist", err, n-i-100)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no term 5 s after the earlier candidates were deleted")
	}
	defer backendtest.Release(t, l)
	if info, err := b.Leader(ctx); err != nil || info.Identity.ID != "c" || info.Token != l.Token() {
		t.Errorf("Leader() = %+v, %v; want c with token %d", info, err, l.Token())
	}
	for _, k := range nested {
		if resp, err := cli.Get(ctx, pfx+k); err != nil || len(resp.Kvs) != 1 {
			t.Errorf("nested key %s: %v, %v", k, resp, err)
		}
	}
}
