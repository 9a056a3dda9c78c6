package backendtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/ledger"
)

// ctx is a context for one call of a subtest: it ends with the test, or
// after 10 s.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func lastIs(t *testing.T, l ledger.Ledger, job string, want time.Time) {
	t.Helper()
	got, err := l.LastClaimed(ctx(t), []string{job})
	if err != nil {
		t.Fatalf("LastClaimed(%q): %v", job, err)
	}
	if len(got) != 1 {
		t.Fatalf("LastClaimed(%q) returned %d ticks, want 1", job, len(got))
	}
	if !got[0].Equal(want) {
		t.Errorf("LastClaimed(%q) = %v, want %v", job, got[0], want)
	}
}

// claim1 claims one tick, in a batch of one.
func claim1(t *testing.T, l ledger.Ledger, c ledger.Claim) error {
	t.Helper()
	return one(t, "Claim", l.Claim, c)
}

// finish1 finishes one run, in a batch of one.
func finish1(t *testing.T, l ledger.Ledger, r ledger.Run) error {
	t.Helper()
	return one(t, "Finish", l.Finish, r)
}

// one calls batch (the ledger's method what) with a batch of x alone and
// returns its error.
func one[T any](t *testing.T, what string, batch func(context.Context, []T) []error, x T) error {
	t.Helper()
	errs := batch(ctx(t), []T{x})
	if len(errs) != 1 {
		t.Fatalf("%s of 1 returned %d errors", what, len(errs))
	}
	return errs[0]
}

func history(t *testing.T, l ledger.Ledger, job string, n int) []ledger.Run {
	t.Helper()
	runs, err := l.History(ctx(t), job, n)
	if err != nil {
		t.Fatal(fmt.Errorf("History(%q, %d): %w", job, n, err))
	}
	return runs
}
