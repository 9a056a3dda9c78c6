package backendtest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// FailoverHarness tells RunFailover how to make elections whose
// candidates carry a tick ledger.
type FailoverHarness struct {
	// NewElection starts a fresh election (new prefix, key or table) and
	// returns a function making candidates for it, each with its own path
	// (Cut, Heal) and Ledger, all using timing.
	NewElection func(t *testing.T, timing election.Timing) func(t *testing.T, name string) Candidate
	// Timing is the lease timing to use: valid for the backend, with a
	// SafetyMargin wide enough that a crashed leader leaves at least two
	// 1-second ticks unclaimed before the next leader starts.
	Timing election.Timing
}

// RunFailover checks the once-per-tick guarantees of a
// backend's ledger with real Hosts on a real backend, as subtests of t:
// after the leader crashes (its path cut, no release), every tick is
// started at most once, and the misfire policies cover the gap exactly as
// documented; a deposed leader's claim is refused, its term ends, and it
// starts nothing.
func RunFailover(t *testing.T, h FailoverHarness) {
	// Alone, first: 1,000 runs a second would slow the other trials' hosts.
	t.Run("CrashFailover/1000-jobs-per-instant", func(t *testing.T) {
		testCrashManyJobs(t, h, 1000)
	})
	for _, tc := range []struct {
		name     string
		policy   schedulerhost.Misfire
		maxCatch int
	}{
		{"skip", schedulerhost.MisfireSkip, 0},
		{"run-once", schedulerhost.MisfireRunOnce, 0},
		{"run-all", schedulerhost.MisfireRunAll, 0},
		{"run-all-capped", schedulerhost.MisfireRunAll, 1},
	} {
		t.Run("CrashFailover/"+tc.name, func(t *testing.T) {
			t.Parallel()
			testCrashPolicy(t, h, tc.policy, tc.maxCatch)
		})
	}
	t.Run("DeposedLeaderCannotClaim", func(t *testing.T) {
		t.Parallel()
		testDeposed(t, h)
	})
}

// runRecord is the job's own record of its runs, independent of the
// ledger.
type runRecord struct {
	mu   sync.Mutex
	runs []recordedRun
}

type recordedRun struct {
	job     string
	by      string
	token   uint64
	tick    time.Time
	at      time.Time
	catchUp bool
}

func (r *runRecord) job(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		tok, _ := election.TokenFromContext(ctx)
		tk, _ := schedulerhost.TickFromContext(ctx)
		r.mu.Lock()
		r.runs = append(r.runs, recordedRun{job: tk.Job, by: name, token: tok, tick: tk.Time, at: time.Now(), catchUp: tk.CatchUp})
		r.mu.Unlock()
		return nil
	}
}

func (r *runRecord) snapshot() []recordedRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedRun(nil), r.runs...)
}

// hostNode is one Elector + Host on a candidate.
type hostNode struct {
	c       Candidate
	elector *election.Elector
	host    *schedulerhost.Host
	stop    func(within time.Duration) bool
}

func startHostNode(t *testing.T, c Candidate, name string, jobs ...schedulerhost.Job) *hostNode {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("BATON_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", name)
	}
	e, err := election.New(election.Config{Backend: c.Backend, Identity: election.Identity{ID: name}, Logger: log, RetryPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	host, err := schedulerhost.New(schedulerhost.Config{Jobs: jobs, Ledger: c.Ledger, Instance: name,
		Logger: log, ShutdownTimeout: 5 * time.Second, KillGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n := &hostNode{c: c, elector: e, host: host}
	n.stop = runElector(e, host.Lead)
	t.Cleanup(func() {
		if c.Heal != nil {
			c.Heal()
		}
		if !n.stop(20 * time.Second) {
			t.Errorf("%s: Run did not return within 20s of cancel", name)
		}
	})
	return n
}

// runElector runs e with lead on a goroutine of its own. stop cancels the
// run and waits up to within for Run to return; it reports whether Run
// did, and may be called again.
func runElector(e *election.Elector, lead func(context.Context, election.Term) error) (stop func(within time.Duration) bool) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(ctx, lead)
	}()
	return func(within time.Duration) bool {
		cancel()
		select {
		case <-done:
			return true
		case <-time.After(within):
			return false
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func waitLeader(t *testing.T, within time.Duration, nodes ...*hostNode) *hostNode {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.elector.IsLeader() {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no leader within %v", within)
	return nil
}

func testCrashPolicy(t *testing.T, h FailoverHarness, policy schedulerhost.Misfire, maxCatch int) {
	newC := h.NewElection(t, h.Timing)
	var rec runRecord
	ttl := h.Timing.TTL
	job := func(name string) schedulerhost.Job {
		return schedulerhost.Job{Name: "tick", Schedule: "@every 1s", Misfire: policy,
			MisfireGrace: time.Minute, MaxCatchUp: maxCatch, Run: rec.job(name)}
	}
	a := startHostNode(t, newC(t, "a"), "a", job("a"))
	waitLeader(t, 10*ttl, a)
	b := startHostNode(t, newC(t, "b"), "b", job("b"))
	time.Sleep(3500 * time.Millisecond) // a runs a few ticks
	if a.c.Cut == nil {
		t.Skip("harness cannot cut a candidate off")
	}
	cut := time.Now()
	a.c.Cut() // a "crashes": nothing it sends arrives, it releases nothing
	waitLeader(t, 3*ttl+10*time.Second, b)
	led := time.Now()
	time.Sleep(3500 * time.Millisecond) // b runs catch-up and a few ticks

	runs := rec.snapshot()
	var newest time.Time // the newest tick the job recorded
	for _, r := range runs {
		if r.tick.After(newest) {
			newest = r.tick
		}
	}
	seen := map[int64]recordedRun{}
	var lastA, firstRegularB time.Time
	var catchUps []recordedRun
	for _, r := range runs {
		if prev, dup := seen[r.tick.UnixNano()]; dup {
			t.Errorf("tick %v started twice: by %s (token %d) and %s (token %d)", r.tick, prev.by, prev.token, r.by, r.token)
		}
		seen[r.tick.UnixNano()] = r
		switch {
		case r.by == "a" && r.tick.After(lastA):
			lastA = r.tick
		case r.by == "b" && r.catchUp:
			catchUps = append(catchUps, r)
		case r.by == "b" && (firstRegularB.IsZero() || r.tick.Before(firstRegularB)):
			firstRegularB = r.tick
		}
	}
	if lastA.IsZero() || firstRegularB.IsZero() {
		t.Fatalf("want runs by both: a's last %v, b's first regular %v (runs %+v)", lastA, firstRegularB, runs)
	}
	// The ledger agrees with the job's own record. It may also hold one
	// claim of a's that nobody ran: the tick after a's last run, claimed
	// just before a's term ended and then not started, either because
	// its answer was lost in the cut (a never learned it was recorded and
	// could not write "not started": the entry says running, or unknown
	// once b's term has settled it) or because a's deadline passed
	// between the claim and the start (the entry says cancelled). Such a
	// tick is claimed, so it is not a missed tick for b. Only one can exist (a claims one tick of the job at a time);
	// nobody ran it (checked above).
	unknown := 0
	if b.c.Ledger != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hist, err := b.c.Ledger.History(ctx, "tick", ledger.DefaultHistory)
		if err != nil {
			t.Fatalf("History: %v", err)
		}
		inLedger := map[int64]bool{}
		for _, r := range hist {
			if inLedger[r.Tick.UnixNano()] {
				t.Errorf("ledger holds tick %v twice", r.Tick)
			}
			inLedger[r.Tick.UnixNano()] = true
			if _, ok := seen[r.Tick.UnixNano()]; ok {
				continue
			}
			if r.Tick.After(newest) {
				continue // claimed after the snapshot of the job's record: b runs on
			}
			notRun := r.Result == ledger.ResultRunning || r.Result == ledger.ResultCancelled ||
				(r.Result == ledger.ResultUnknown && strings.Contains(r.Error, "settled by the term"))
			if r.Instance == "a" && notRun && r.Tick.Equal(lastA.Add(time.Second)) && unknown == 0 {
				unknown++
				t.Logf("ledger holds a's claim of tick %v, not run by anyone (%s %q)", r.Tick.Format("15:04:05"), r.Result, r.Error)
				continue
			}
			if r.Result == ledger.ResultCancelled {
				continue
			}
			t.Errorf("ledger has run %+v that the job never recorded", r)
		}
	}
	// Regular ticks of b's that came due while its catch-up runs still
	// went were skipped by the job's overlap policy (skip, the default):
	// they lie between the newest catch-up tick and b's first regular run,
	// and are not misfires.
	skipped := 0
	for _, js := range b.host.Status() {
		skipped += int(js.Skipped)
	}
	missed := int(firstRegularB.Sub(lastA)/time.Second) - 1 - unknown - skipped
	want := 0
	switch policy {
	case schedulerhost.MisfireRunOnce:
		want = min(missed, 1)
	case schedulerhost.MisfireRunAll:
		capped := maxCatch
		if capped == 0 {
			capped = schedulerhost.DefaultMaxCatchUp
		}
		want = min(missed, capped)
	}
	t.Logf("policy %s: cut at +0, b led at +%v; a's last tick %s, b's first regular tick %s: %d missed, %d catch-up run(s), %d regular tick(s) skipped as overlaps",
		policy, led.Sub(cut).Round(time.Millisecond), lastA.Format("15:04:05"), firstRegularB.Format("15:04:05"), missed, len(catchUps), skipped)
	if missed < 2 {
		t.Errorf("only %d ticks missed: widen Timing.SafetyMargin so the policies can be told apart", missed)
	}
	if len(catchUps) != want {
		t.Errorf("catch-up runs = %d, want %d for %s with %d missed (cap %d)", len(catchUps), want, policy, missed, maxCatch)
	}
	for i, c := range catchUps {
		if w := firstRegularB.Add(-time.Duration(len(catchUps)-i+skipped) * time.Second); !c.tick.Equal(w) {
			t.Errorf("catch-up %d ran tick %v, want %v (the newest missed ticks, oldest first)", i, c.tick, w)
		}
	}
}

func testDeposed(t *testing.T, h FailoverHarness) {
	newC := h.NewElection(t, h.Timing)
	a, b := newC(t, "a"), newC(t, "b")
	if a.Cut == nil || a.Ledger == nil || b.Depose == nil {
		t.Skip("harness cannot cut a candidate off or depose a leader, or has no ledger")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*h.Timing.TTL)
	defer cancel()
	la, err := a.Backend.Acquire(ctx, election.Identity{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(context.Background())
	tick := time.Now().Truncate(time.Second)
	if err := a.Ledger.Claim(ctx, []ledger.Claim{ledger.Claim{Job: "j", Tick: tick, Token: la.Token(), Instance: "a", Started: time.Now()}})[0]; err != nil {
		t.Fatalf("leader's claim: %v", err)
	}
	// a is partitioned, then deposed on the backend; b leads.
	a.Cut()
	b.Depose(t, la)
	lb, err := b.Backend.Acquire(ctx, election.Identity{ID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release(context.Background())
	if lb.Token() <= la.Token() {
		t.Errorf("b's token %d <= a's %d", lb.Token(), la.Token())
	}
	// a comes back before its local deadline and tries to claim the next
	// tick with its old token.
	a.Heal()
	err = a.Ledger.Claim(ctx, []ledger.Claim{ledger.Claim{Job: "j", Tick: tick.Add(time.Second), Token: la.Token(), Instance: "a", Started: time.Now()}})[0]
	if !errors.Is(err, ledger.ErrStaleTerm) || !errors.Is(err, election.ErrLeadershipLost) {
		t.Fatalf("deposed leader's claim: err = %v, want ErrStaleTerm", err)
	}
	select {
	case <-la.Done():
	case <-time.After(h.Timing.TTL):
		// Its renewals fail from the heal on, and its local deadline is
		// less than a TTL after its last renewal, before the cut.
		t.Fatalf("deposed leader's term still open %v (the TTL) after its claim was refused", h.Timing.TTL)
	}
	if !errors.Is(la.Err(), election.ErrLeadershipLost) {
		t.Errorf("deposed leader's Err() = %v, want ErrLeadershipLost", la.Err())
	}
	// b claims the same tick: the deposed claim left nothing behind.
	if err := b.Ledger.Claim(ctx, []ledger.Claim{ledger.Claim{Job: "j", Tick: tick.Add(time.Second), Token: lb.Token(), Instance: "b", Started: time.Now()}})[0]; err != nil {
		t.Errorf("new leader's claim of the same tick: %v", err)
	}
	last, err := b.Ledger.LastClaimed(ctx, []string{"j"})
	if err != nil || !last[0].Equal(tick.Add(time.Second)) {
		t.Errorf("LastClaimed = %v, %v; want %v", last, err, tick.Add(time.Second))
	}
}
