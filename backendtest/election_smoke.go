package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// RunSmoke is a short conformance-style check of two candidates of one
// election, for backends reached with credentials or TLS that the full
// suites do not set up: a and b pass Check (if they implement
// driver.Checker); a acquires; b reads a as the leader (if it implements
// driver.LeaderReader) and does not lead while a holds; a releases and b
// leads with a greater token; b claims a tick in its ledger (if it has a
// Ledger() method) and a claim with a's old token is refused as stale; b
// releases. timeout bounds each step.
func RunSmoke(t *testing.T, a, b election.Backend, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for name, be := range map[string]election.Backend{"a": a, "b": b} {
		if c, ok := be.(driver.Checker); ok {
			if err := c.Check(ctx); err != nil {
				t.Fatalf("%s: Check: %v", name, err)
			}
		}
	}
	la := Acquire(t, a, "a", timeout)
	if lr, ok := b.(driver.LeaderReader); ok {
		info, err := lr.Leader(ctx)
		if err != nil || info.Identity.ID != "a" || info.Token != la.Token() {
			t.Errorf("b: Leader() = %+v, %v; want a with token %d", info, err, la.Token())
		}
	}
	bctx, bcancel := context.WithTimeout(context.Background(), timeout)
	defer bcancel()
	got := AcquireAsync(bctx, b, "b")
	select {
	case r := <-got:
		t.Fatalf("b: Acquire returned (%v) while a holds the election", r.Err)
	case <-time.After(200 * time.Millisecond): // b is campaigning; a still leads
	}
	if !IsOpen(la) {
		t.Fatalf("a: term ended before Release: %v", la.Err())
	}
	Release(t, la)
	r := <-got
	if r.Err != nil {
		t.Fatalf("b: Acquire after a released: %v", r.Err)
	}
	lb := r.Lease
	defer Release(t, lb)
	if lb.Token() <= la.Token() {
		t.Errorf("b's token %d not above a's %d", lb.Token(), la.Token())
	}
	lg, ok := b.(driver.Ledgerer)
	if !ok {
		return
	}
	tick := time.Now().UTC().Truncate(time.Second)
	c := ledger.Claim{Job: "smoke", Tick: tick, Token: lb.Token(), Instance: "b", Started: time.Now()}
	if err := lg.Ledger().Claim(ctx, []ledger.Claim{c})[0]; err != nil {
		t.Fatalf("b: Claim: %v", err)
	}
	if last, err := lg.Ledger().LastClaimed(ctx, []string{"smoke"}); err != nil || !last[0].Equal(tick) {
		t.Errorf("b: LastClaimed = %v, %v; want %v", last, err, tick)
	}
	c.Tick, c.Token, c.Instance = tick.Add(time.Second), la.Token(), "a"
	if err := lg.Ledger().Claim(ctx, []ledger.Claim{c})[0]; !errors.Is(err, ledger.ErrStaleTerm) {
		t.Errorf("claim with a's ended term: %v, want ErrStaleTerm", err)
	}
}
