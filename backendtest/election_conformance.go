package backendtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Candidate is one contender in a conformance election: a Backend with a
// network path of its own, which Cut and Heal affect alone (blackhole and
// restore, typically through a Proxy).
type Candidate struct {
	Backend election.Backend
	Cut     func()
	Heal    func()
	// Ledger is the backend's tick ledger for this candidate, for
	// RunFailover; nil
	// where only the lease rules are tested.
	Ledger ledger.Ledger
	// Depose, if set, ends the term of lease on the backend side only
	// (revoke it, expire its row, destroy its session), as an operator or
	// an expiry would, so that another candidate can lead while the holder
	// has not noticed. For RunFailover.
	Depose func(t *testing.T, lease election.Lease)
}

// ElectionHarness tells RunElection how to make elections on the backend under
// test and what to expect of it.
type ElectionHarness struct {
	// NewElection starts a fresh election (a new key prefix, row or table)
	// and returns a function making candidates for it. Resources belong to
	// t (use t.Cleanup).
	NewElection func(t *testing.T) func(t *testing.T, name string) Candidate
	// TTL is the lease TTL the candidates use.
	TTL time.Duration
	// HandoverBound is how long a graceful handover takes through the
	// backend's wake-up (the waiting candidate learns of the release, as
	// opposed to finding the lease lapsed): the median handover of
	// RepeatedGracefulHandover must be within it. A single handover,
	// which a loaded machine can delay, must be within the larger of
	// HandoverBound and TTL/2 (lapseBound). Zero means 1 s.
	HandoverBound time.Duration
	// CutTrials is how many times the network-cut rule is tried. Zero
	// means 20.
	CutTrials int
	// Handovers is how many graceful handovers in a row the repeated
	// handover test makes, their median within HandoverBound. Zero skips
	// it.
	Handovers int
	// FailoverBound is how long after the leader's path is cut (no
	// release, as in a crash) a waiting candidate may take to lead. Zero
	// skips the crash failover test.
	FailoverBound time.Duration
	// FailoverTrials is how many crash failovers are tried. Zero means 1.
	FailoverTrials int
	// Package, if set, is the import path of the backend: after Release no
	// goroutine may remain with a function of that package on its stack.
	// The check sees every goroutine of the process, so do not run other
	// tests of that package in parallel with RunElection.
	Package string
}

func (h ElectionHarness) handover() time.Duration {
	if h.HandoverBound > 0 {
		return h.HandoverBound
	}
	return time.Second
}

// lapseBound bounds one graceful handover (or one campaign for a free
// election), whatever the machine's load: the larger of HandoverBound and
// TTL/2. A candidate that missed the release would lead only once the
// released lease lapsed, at least TTL - RenewInterval after the holder's
// last renewal, and RenewInterval is under TTL/2 on every backend: so a
// handover within TTL/2 was a handover, not a lapse, and TTL/2 (1 s at a
// 2 s TTL) is a margin no scheduling delay reaches. How fast a handover
// is, is the benchmarks' question (make bench) and the median's of
// RepeatedGracefulHandover.
func (h ElectionHarness) lapseBound() time.Duration {
	return max(h.handover(), h.TTL/2)
}

// RunElection checks every lease rule of the election contract against
// the backend h describes, as subtests of t.
//
// AcquireRelease runs first and alone: it checks that no goroutine of
// h.Package is left after Release, which any other test running at the
// time would break. The two handover tests follow, alone too: they time
// handovers against HandoverBound and the TTL (lapseBound). The others
// run at the same time, each in elections of its own: most of their time
// is spent waiting for leases to lapse (on Consul, a TTL and a lock-delay
// each), so one after another they were the longest part of a backend's
// conformance run.
func RunElection(t *testing.T, h ElectionHarness) {
	t.Run("AcquireRelease", func(t *testing.T) { testAcquireRelease(t, h) })
	t.Run("ExclusionAndPromptHandover", func(t *testing.T) { testHandover(t, h) })
	t.Run("RepeatedGracefulHandover", func(t *testing.T) { testRepeatedHandover(t, h) })
	rest := []struct {
		name string
		test func(*testing.T, ElectionHarness)
	}{
		{"LeaseOutlivesAcquireContext", testOutlivesCtx},
		{"AcquireHonoursContext", testAcquireCancel},
		{"TokensIncreaseAfterExpiry", testExpiry},
		{"ReleaseBoundedByContext", testReleaseBounded},
		{"LeaderReader", testLeaderReader},
		{"NetworkCutEndsTermFirst", testNetworkCut},
		{"CrashFailover", testCrashFailover},
	}
	var wg sync.WaitGroup
	for _, r := range rest {
		wg.Go(func() { t.Run(r.name, func(t *testing.T) { r.test(t, h) }) })
	}
	wg.Wait()
}

func testAcquireRelease(t *testing.T, h ElectionHarness) {
	newC := h.NewElection(t)
	a := newC(t, "a")
	l := Acquire(t, a.Backend, "a", 10*h.TTL)
	if l.Token() == 0 {
		t.Errorf("Token() = 0, want a positive fencing token")
	}
	if err := l.Err(); err != nil || !IsOpen(l) {
		t.Fatalf("fresh lease: Err() = %v, Done open = %v; want nil, true", err, IsOpen(l))
	}
	Release(t, l)
	if IsOpen(l) {
		t.Fatal("Done still open after Release")
	}
	if err := l.Err(); !errors.Is(err, election.ErrReleased) {
		t.Fatalf("Err() after Release = %v, want ErrReleased", err)
	}
	Release(t, l) // idempotent
	if h.Package != "" {
		checkNoGoroutines(t, h.Package)
	}
	// The election is free again at once, not once the lease lapsed.
	l2 := Acquire(t, newC(t, "b").Backend, "b", h.lapseBound())
	if l2.Token() <= l.Token() {
		t.Errorf("second term token %d <= first %d", l2.Token(), l.Token())
	}
	Release(t, l2)
}

func testOutlivesCtx(t *testing.T, h ElectionHarness) {
	newC := h.NewElection(t)
	a, b := newC(t, "a"), newC(t, "b")
	ctx, cancel := context.WithCancel(context.Background())
	l, err := a.Backend.Acquire(ctx, election.Identity{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer Release(t, l)
	cancel()
	// Hold across more than one TTL: renewals must not depend on ctx.
	wait := h.TTL + h.TTL/2
	bctx, bcancel := context.WithTimeout(context.Background(), wait)
	defer bcancel()
	if lb, err := b.Backend.Acquire(bctx, election.Identity{ID: "b"}); err == nil {
		Release(t, lb)
		t.Fatal("b acquired while a held the lease whose Acquire ctx was cancelled")
	}
	if !IsOpen(l) || l.Err() != nil {
		t.Fatalf("lease ended after its Acquire ctx was cancelled: %v", l.Err())
	}
}

func testHandover(t *testing.T, h ElectionHarness) {
	newC := h.NewElection(t)
	a, b := newC(t, "a"), newC(t, "b")
	la := Acquire(t, a.Backend, "a", 10*h.TTL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := AcquireAsync(ctx, b.Backend, "b")
	// b must wait while a renews, across more than one TTL.
	select {
	case r := <-ch:
		if r.Lease != nil {
			r.Lease.Release(context.Background())
		}
		t.Fatalf("b's Acquire returned while a held the lease: %v", r.Err)
	case <-time.After(h.TTL + h.TTL/2):
	}
	if !IsOpen(la) {
		t.Fatalf("a's lease ended while held: %v", la.Err())
	}
	released := time.Now()
	Release(t, la)
	r := Await(t, ch, 10*h.TTL, "b did not lead within 10 TTLs of a's release")
	if r.Err != nil {
		t.Fatalf("b: Acquire: %v", r.Err)
	}
	defer Release(t, r.Lease)
	took := r.At.Sub(released)
	t.Logf("graceful handover: %v (from Release called to b leading; HandoverBound %v)", took.Round(time.Microsecond), h.handover())
	if took > h.lapseBound() {
		t.Errorf("handover took %v, want <= %v: b waited for the released lease to lapse", took, h.lapseBound())
	}
	if r.Lease.Token() <= la.Token() {
		t.Errorf("b's token %d <= a's %d", r.Lease.Token(), la.Token())
	}
}

func testAcquireCancel(t *testing.T, h ElectionHarness) {
	newC := h.NewElection(t)
	a, b := newC(t, "a"), newC(t, "b")
	la := Acquire(t, a.Backend, "a", 10*h.TTL)
	defer Release(t, la)
	ctx, cancel := context.WithCancel(context.Background())
	ch := AcquireAsync(ctx, b.Backend, "b")
	time.Sleep(200 * time.Millisecond)
	cancelled := time.Now()
	cancel()
	select {
	case r := <-ch:
		if r.Err == nil {
			r.Lease.Release(context.Background())
			t.Fatal("b acquired while a held the lease")
		}
		if !errors.Is(r.Err, context.Canceled) {
			t.Errorf("Acquire error = %v, want one wrapping context.Canceled", r.Err)
		}
		t.Logf("Acquire returned %v after cancel", r.At.Sub(cancelled).Round(time.Microsecond))
	case <-time.After(time.Second):
		t.Fatal("Acquire did not return within 1s of its ctx being cancelled")
	}
}

func testExpiry(t *testing.T, h ElectionHarness) {
	newC := h.NewElection(t)
	a, b := newC(t, "a"), newC(t, "b")
	if a.Cut == nil {
		t.Skip("backend harness cannot cut a candidate off")
	}
	la := Acquire(t, a.Backend, "a", 10*h.TTL)
	a.Cut()
	lb := Acquire(t, b.Backend, "b", 10*h.TTL)
	if IsOpen(la) {
		t.Fatal("a's lease still open after b acquired")
	}
	if err := la.Err(); !errors.Is(err, election.ErrLeadershipLost) {
		t.Errorf("a's Err() = %v, want ErrLeadershipLost", err)
	}
	if lb.Token() <= la.Token() {
		t.Errorf("token after expiry %d <= expired term's %d", lb.Token(), la.Token())
	}
	a.Heal()
	// Releasing a lost lease is safe and must not touch b's term.
	Release(t, la)
	time.Sleep(h.TTL / 4)
	if !IsOpen(lb) {
		t.Fatalf("b's lease ended after a released its lost lease: %v", lb.Err())
	}
	Release(t, lb)
	// Tokens also increase after a release.
	lc := Acquire(t, a.Backend, "a2", h.handover()+h.TTL)
	if lc.Token() <= lb.Token() {
		t.Errorf("token after release %d <= previous %d", lc.Token(), lb.Token())
	}
	Release(t, lc)
}

func testReleaseBounded(t *testing.T, h ElectionHarness) {
	newC := h.NewElection(t)
	a := newC(t, "a")
	if a.Cut == nil {
		t.Skip("backend harness cannot cut a candidate off")
	}
	la := Acquire(t, a.Backend, "a", 10*h.TTL)
	a.Cut()
	defer a.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = la.Release(ctx) // an error is expected: the backend cannot be told
	if took := time.Since(start); took > 1300*time.Millisecond {
		t.Errorf("Release with a 300ms ctx over a cut network took %v", took)
	}
	if IsOpen(la) || !errors.Is(la.Err(), election.ErrReleased) {
		t.Errorf("after Release: Done open = %v, Err = %v; want closed, ErrReleased", IsOpen(la), la.Err())
	}
}

func testLeaderReader(t *testing.T, h ElectionHarness) {
	newC := h.NewElection(t)
	a, b := newC(t, "a"), newC(t, "b")
	lr, ok := b.Backend.(driver.LeaderReader)
	if !ok {
		t.Skip("backend does not implement driver.LeaderReader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := lr.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("Leader() before any term: err = %v, want ErrNoLeader", err)
	}
	la := Acquire(t, a.Backend, "a", 10*h.TTL)
	info, err := lr.Leader(ctx)
	if err != nil {
		t.Fatalf("Leader(): %v", err)
	}
	if info.Identity.ID != "a" || info.Token != la.Token() {
		t.Errorf("Leader() = %+v, want id a, token %d", info, la.Token())
	}
	Release(t, la)
	if _, err := lr.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("Leader() after release: err = %v, want ErrNoLeader", err)
	}
}
