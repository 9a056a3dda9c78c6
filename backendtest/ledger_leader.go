package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
)

// Leader returns a function for LedgerElection.Lead that takes terms of b, in
// the name of one candidate: each call releases the term the call before
// took, then acquires a new one (within 30s). The last term is released
// when the test that took it ends.
func Leader(b election.Backend) func(t *testing.T) uint64 {
	var cur election.Lease
	return func(t *testing.T) uint64 {
		t.Helper()
		if cur != nil {
			if err := cur.Release(ctx(t)); err != nil {
				t.Fatalf("release token %d: %v", cur.Token(), err)
			}
		}
		actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := b.Acquire(actx, election.Identity{ID: "ledgertest"})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		cur = l
		t.Cleanup(func() {
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = l.Release(rctx) // idempotent: a later Lead may have released it
		})
		return l.Token()
	}
}
