package etcd_test

import (
	"context"
	"testing"
	"time"
)

func TestBackend_Check(t *testing.T) {
	pfx := prefix(t)
	cli, p := proxied(t)
	b := newBackend(t, cli, pfx, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if n := countKeys(t, dial(t, server(t).Addr()), pfx); n != 0 {
		t.Errorf("Check left %d keys under the election", n)
	}
	p.Blackhole()
	defer p.Heal()
	sctx, scancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer scancel()
	if err := b.Check(sctx); err == nil {
		t.Error("Check succeeded over a cut network")
	}
}
