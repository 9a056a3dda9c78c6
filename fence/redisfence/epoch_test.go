package redisfence_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/fence/redisfence"
	"github.com/batonhq/baton/internal/redistest"
)

// The election's token counter moves to a new Redis (INCR starts over
// at 1) while the fences live in the resource's Redis: a new epoch is
// recognised and the old Redis's late writes are refused; with the epoch
// unchanged every write is refused until the operator's Reset.
func TestGuard_NewRedisBelowTheFence(t *testing.T) {
	ctx := context.Background()
	res := client(t, redistest.Start(t)) // the resource, and its fences
	g := &redisfence.Guard{Client: res, Election: "reports"}
	at := func(epoch, n uint64) fence.Token { return fence.Token{Election: "reports", Epoch: epoch, N: n} }
	set := func(r string, tok fence.Token) error {
		return g.Set(ctx, r, tok, "data:"+r, strconv.FormatUint(tok.N, 10), 0)
	}

	old := client(t, redistest.Start(t)) // the election's first Redis
	var last uint64
	for range 3 {
		n, err := old.Incr(ctx, "baton:token").Uint64()
		if err != nil {
			t.Fatal(err)
		}
		last = n
		for _, r := range []string{"epoch", "reset"} {
			if err := set(r, at(1, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	fresh := client(t, redistest.Start(t)) // a new Redis: the counter starts over
	first, err := fresh.Incr(ctx, "baton:token").Uint64()
	if err != nil || first >= last {
		t.Fatalf("the new Redis's first token %d (%v); want below %d", first, err, last)
	}

	err = set("reset", at(1, first))
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("same epoch, token %d after %d: %v; want ErrStale", first, last, err)
	}
	t.Logf("same epoch, before the reset: %v", err)
	if err := g.Reset(ctx, "reset"); err != nil {
		t.Fatal(err)
	}
	if err := set("reset", at(1, first)); err != nil {
		t.Errorf("after the reset: %v", err)
	}

	if err := set("epoch", at(2, first)); err != nil {
		t.Fatalf("epoch 2 token %d after epoch 1 token %d: %v; want a new fence", first, last, err)
	}
	err = set("epoch", at(1, last+1))
	if !errors.Is(err, fence.ErrStale) {
		t.Errorf("epoch 1 token %d after epoch 2: %v; want ErrStale", last+1, err)
	}
	t.Logf("old epoch after the new: %v", err)
	if v, _ := res.Get(ctx, "data:epoch").Result(); v != strconv.FormatUint(first, 10) {
		t.Errorf("data:epoch = %q; want the new epoch's write, %d", v, first)
	}
	if f, ok, err := g.Read(ctx, "epoch"); err != nil || !ok || f != at(2, first) {
		t.Errorf("fence = %v, %v, %v; want epoch 2 token %d", f, ok, err, first)
	}
}
