package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// A deposed term's claim that passed its read of the Lease before the
// next term began, and reaches its shard only after the next term's
// catch-up read it: the read raised the shard's fence, so the claim is
// refused as stale. Without that, the claim would land unseen and the
// tick run twice (by the deposed term, and by the next term's catch-up).
// And before the next term reads, the same late claim lands, and the
// next term reads it.
func TestLedger_ReadFencesAClaimInFlight(t *testing.T) {
	server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := leaseName(t)
	b := newBackend(t, kube.Config{Name: name, Timing: election.Timing{TTL: 3 * time.Second}})
	led := b.Ledger()
	tick := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	term := func(id string) election.Lease {
		l, err := b.Acquire(ctx, election.Identity{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	old := term("old")
	if err := led.Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick, Token: old.Token(), Instance: "old", Started: tick}})[0]; err != nil {
		t.Fatal(err)
	}
	// The old term's Lease is deleted (its holder cut off, an operator's
	// kubectl delete); the next term starts and its catch-up reads.
	if err := kube.DeleteLease(ctx, client(t, ""), "default", name); err != nil {
		t.Fatal(err)
	}
	next := term("next")
	last, err := led.LastClaimed(ctx, []string{"j"})
	if err != nil || !last[0].Equal(tick) {
		t.Fatalf("the next term read %v, %v; want %v", last, err, tick)
	}
	late := ledger.Claim{Job: "j", Tick: tick.Add(time.Second), Token: old.Token(), Instance: "old", Started: tick}
	err = kube.ClaimPastLeaseCheck(ctx, led, []ledger.Claim{late})[0]
	if !errors.Is(err, ledger.ErrStaleTerm) {
		t.Fatalf("the old term's claim in flight after the next term's read: %v, want ErrStaleTerm", err)
	}
	if last, _ := led.LastClaimed(ctx, []string{"j"}); !last[0].Equal(tick) {
		t.Errorf("last claimed %v after the refused claim, want %v", last[0], tick)
	}

	// A claim in flight that reaches another job's shard before the next
	// term reads that job lands, and the read sees it.
	if err := kube.ClaimPastLeaseCheck(ctx, led, []ledger.Claim{{Job: "k", Tick: tick, Token: old.Token(), Instance: "old", Started: tick}})[0]; err != nil {
		t.Fatalf("a claim in flight before the next term's read: %v, want it recorded", err)
	}
	if last, err := led.LastClaimed(ctx, []string{"k"}); err != nil || !last[0].Equal(tick) {
		t.Errorf("the next term read k's last claim %v, %v; want %v", last, err, tick)
	}
	if err := led.Claim(ctx, []ledger.Claim{{Job: "k", Tick: tick, Token: next.Token(), Instance: "next", Started: tick}})[0]; !errors.Is(err, ledger.ErrTickClaimed) {
		t.Errorf("the next term's claim of the same tick: %v, want ErrTickClaimed", err)
	}
	next.Release(ctx)
}

// A writer keeps the shard as its last write left it and writes from that
// copy next time. When the next term, in another process, has read the
// shard since (raising its fence), the deposed writer's copy is stale:
// its write is refused by resourceVersion, it reads the shard afresh and
// finds the fence above its token. And a term in the first process again
// later, with a higher token, reads the other process's claim.
func TestLedger_AKeptCopyMeetsTheNextTermsFence(t *testing.T) {
	server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := leaseName(t)
	cfg := kube.Config{Name: name, Timing: election.Timing{TTL: 3 * time.Second}}
	a, b := newBackend(t, cfg), newBackend(t, cfg)
	tick := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	acquire := func(be *kube.Backend, id string) election.Lease {
		l, err := be.Acquire(ctx, election.Identity{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	claim := func(be *kube.Backend, l election.Lease, at time.Time) error {
		return be.Ledger().Claim(ctx, []ledger.Claim{{Job: "j", Tick: at, Token: l.Token(), Instance: "x", Started: at}})[0]
	}
	old := acquire(a, "a")
	if err := claim(a, old, tick); err != nil {
		t.Fatal(err)
	}
	if err := kube.DeleteLease(ctx, client(t, ""), "default", name); err != nil {
		t.Fatal(err)
	}
	next := acquire(b, "b")
	if last, err := b.Ledger().LastClaimed(ctx, []string{"j"}); err != nil || !last[0].Equal(tick) {
		t.Fatalf("the next term read %v, %v; want %v", last, err, tick)
	}
	late := ledger.Claim{Job: "j", Tick: tick.Add(time.Second), Token: old.Token(), Instance: "a", Started: tick}
	if err := kube.ClaimPastLeaseCheck(ctx, a.Ledger(), []ledger.Claim{late})[0]; !errors.Is(err, ledger.ErrStaleTerm) {
		t.Fatalf("the deposed writer's claim from its kept copy: %v, want ErrStaleTerm", err)
	}
	if err := claim(b, next, tick.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	next.Release(ctx)
	again := acquire(a, "a")
	if last, err := a.Ledger().LastClaimed(ctx, []string{"j"}); err != nil || !last[0].Equal(tick.Add(2*time.Second)) {
		t.Errorf("the first process's next term read %v, %v; want %v", last, err, tick.Add(2*time.Second))
	}
	if err := claim(a, again, tick.Add(2*time.Second)); !errors.Is(err, ledger.ErrTickClaimed) {
		t.Errorf("claiming the other process's tick again: %v, want ErrTickClaimed", err)
	}
	again.Release(ctx)
}
