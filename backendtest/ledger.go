package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// LedgerElection is one fresh election (no term held, no claims) with its
// ledger, as a backend's harness sets it up.
type LedgerElection struct {
	// Ledger is the election's ledger. Required.
	Ledger ledger.Ledger
	// Lead ends the term an earlier call of Lead started, if any, makes a
	// new term that holds the election, and returns its token. It blocks
	// until the term holds. Required.
	Lead func(t *testing.T) uint64
	// History is how many runs per job the ledger keeps. Zero means
	// ledger.DefaultHistory.
	History int
}

// tick0 is a whole second, so that every backend stores it exactly.
var tick0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

// RunLedger runs the suite: each subtest calls newElection once. It blocks
// until every subtest is done.
func RunLedger(t *testing.T, newElection func(t *testing.T) LedgerElection) {
	for _, c := range []struct {
		name string
		test func(t *testing.T, e LedgerElection)
	}{
		{"ClaimRecordsRunning", testClaimRecordsRunning},
		{"AlreadyClaimed", testAlreadyClaimed},
		{"JobsAreSeparate", testJobsAreSeparate},
		{"StaleTermRefused", testStaleTermRefused},
		{"Finish", testFinish},
		{"FinishAttempts", testFinishAttempts},
		{"HistoryNewestFirstAndBounded", testHistoryNewestFirstAndBounded},
		{"BatchSomeAlreadyClaimed", testBatchSomeAlreadyClaimed},
		{"BatchStaleTermRefused", testBatchStaleTermRefused},
		{"BatchLargerThanMaxBatch", testBatchLargerThanMaxBatch},
		{"JobWithNoClaims", testJobWithNoClaims},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, newElection(t)) })
	}
	settleLedger(t, newElection)
}

// testClaimRecordsRunning checks that a claim records its run as running,
// with every field of the claim.
func testClaimRecordsRunning(t *testing.T, e LedgerElection) {
	tok := e.Lead(t)
	c := ledger.Claim{Job: "report", Tick: tick0, Token: tok, Instance: "node-a", CatchUp: true, Started: tick0.Add(time.Second)}
	if err := claim1(t, e.Ledger, c); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	lastIs(t, e.Ledger, "report", tick0)
	runs := history(t, e.Ledger, "report", 10)
	if len(runs) != 1 {
		t.Fatalf("History = %+v, want one run", runs)
	}
	r := runs[0]
	if r.Job != "report" || !r.Tick.Equal(tick0) || r.Token != tok || r.Instance != "node-a" || !r.CatchUp ||
		!r.Started.Equal(c.Started) || r.Result != ledger.ResultRunning || !r.Ended.IsZero() {
		t.Errorf("History()[0] = %+v, want the claim, running", r)
	}
}

// testAlreadyClaimed checks that a claim of a tick not after the job's
// last one is refused with ErrTickClaimed, in any zone, and records
// nothing.
func testAlreadyClaimed(t *testing.T, e LedgerElection) {
	tok := e.Lead(t)
	claim := func(tick time.Time) error {
		return claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: tick, Token: tok, Instance: "node-a", Started: tick})
	}
	if err := claim(tick0.Add(time.Minute)); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	// The same instant in another zone is the same tick.
	for _, tick := range []time.Time{tick0.Add(time.Minute), tick0.Add(time.Minute).In(time.FixedZone("X", 3600)), tick0} {
		if err := claim(tick); !errors.Is(err, ledger.ErrTickClaimed) {
			t.Errorf("Claim at %v after %v: %v, want ErrTickClaimed", tick, tick0.Add(time.Minute), err)
		}
	}
	lastIs(t, e.Ledger, "report", tick0.Add(time.Minute))
	if runs := history(t, e.Ledger, "report", 10); len(runs) != 1 {
		t.Errorf("History after refused claims = %+v, want one run", runs)
	}
	// Another job's ticks are its own.
	if err := claim1(t, e.Ledger, ledger.Claim{Job: "other", Tick: tick0, Token: tok, Instance: "node-a", Started: tick0}); err != nil {
		t.Errorf("Claim of another job at an earlier tick: %v", err)
	}
}

// testJobsAreSeparate checks that jobs whose names share a prefix or hold
// a slash or a space keep their own ticks and runs.
func testJobsAreSeparate(t *testing.T, e LedgerElection) {
	tok := e.Lead(t)
	// Names that share a prefix, or hold a slash or a space, are
	// separate jobs.
	jobs := []string{"mail", "mail/runs", "mail/daily report"}
	for i, job := range jobs {
		tick := tick0.Add(time.Duration(len(jobs)-i) * time.Minute) // later ticks first
		if err := claim1(t, e.Ledger, ledger.Claim{Job: job, Tick: tick, Token: tok, Instance: "node-a", Started: tick}); err != nil {
			t.Fatalf("Claim of %q: %v", job, err)
		}
	}
	for i, job := range jobs {
		tick := tick0.Add(time.Duration(len(jobs)-i) * time.Minute)
		lastIs(t, e.Ledger, job, tick)
		runs := history(t, e.Ledger, job, 10)
		if len(runs) != 1 || runs[0].Job != job || !runs[0].Tick.Equal(tick) {
			t.Errorf("History(%q) = %+v, want its one run", job, runs)
		}
	}
}

// testStaleTermRefused checks that a claim with an ended term's token is
// refused with ErrStaleTerm wrapping ErrLeadershipLost.
func testStaleTermRefused(t *testing.T, e LedgerElection) {
	old := e.Lead(t)
	if err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: tick0, Token: old, Instance: "node-a", Started: tick0}); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	cur := e.Lead(t)
	if cur <= old {
		t.Fatalf("new term's token %d not above the old %d", cur, old)
	}
	next := tick0.Add(time.Minute)
	err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: next, Token: old, Instance: "node-a", Started: next})
	if !errors.Is(err, ledger.ErrStaleTerm) || !errors.Is(err, election.ErrLeadershipLost) {
		t.Fatalf("Claim with the old term's token: %v, want ErrStaleTerm wrapping ErrLeadershipLost", err)
	}
	lastIs(t, e.Ledger, "report", tick0)
	if err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: next, Token: cur, Instance: "node-b", Started: next}); err != nil {
		t.Errorf("Claim with the new term's token: %v", err)
	}
	lastIs(t, e.Ledger, "report", next)
}

// testFinish checks that Finish stores a run's outcome, and ignores a run
// with no entry.
func testFinish(t *testing.T, e LedgerElection) {
	tok := e.Lead(t)
	if err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: tick0, Token: tok, Instance: "node-a", Started: tick0}); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	done := ledger.Run{Job: "report", Tick: tick0, Instance: "node-a", Token: tok, Started: tick0,
		Ended: tick0.Add(3 * time.Second), Result: ledger.ResultFailed, Error: "exit status 2"}
	if err := finish1(t, e.Ledger, done); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	runs := history(t, e.Ledger, "report", 10)
	if len(runs) != 1 {
		t.Fatalf("History = %+v, want one run", runs)
	}
	if r := runs[0]; !r.Tick.Equal(tick0) || r.Token != tok || r.Result != ledger.ResultFailed ||
		r.Error != done.Error || !r.Ended.Equal(done.Ended) {
		t.Errorf("History()[0] after Finish = %+v, want %+v", r, done)
	}
	// A run with no entry (trimmed, or never claimed) is ignored.
	gone := ledger.Run{Job: "report", Tick: tick0.Add(time.Hour), Token: tok, Result: ledger.ResultOK}
	if err := finish1(t, e.Ledger, gone); err != nil {
		t.Errorf("Finish of a run with no entry: %v", err)
	}
	if runs := history(t, e.Ledger, "report", 10); len(runs) != 1 || runs[0].Result != ledger.ResultFailed {
		t.Errorf("History after Finish of a run with no entry = %+v", runs)
	}
}

// testFinishAttempts checks that Finish stores a run's attempts.
func testFinishAttempts(t *testing.T, e LedgerElection) {
	tok := e.Lead(t)
	for i, attempts := range []int{3, 1, 0} {
		tick := tick0.Add(time.Duration(i) * time.Minute)
		if err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: tick, Token: tok, Instance: "node-a", Started: tick}); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if r := history(t, e.Ledger, "report", 1); len(r) != 1 || r[0].Attempts > 1 {
			t.Errorf("History after Claim = %+v, want one running run with at most one attempt", r)
		}
		done := ledger.Run{Job: "report", Tick: tick, Instance: "node-a", Token: tok, Started: tick,
			Ended: tick.Add(3 * time.Second), Result: ledger.ResultOK, Attempts: attempts}
		if err := finish1(t, e.Ledger, done); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		runs := history(t, e.Ledger, "report", 1)
		if len(runs) != 1 || !runs[0].Tick.Equal(tick) {
			t.Fatalf("History = %+v, want the run at %v", runs, tick)
		}
		if got := runs[0].Attempts; got != attempts {
			t.Errorf("History()[0].Attempts after Finish with Attempts %d = %d", attempts, got)
		}
	}
}

// testHistoryNewestFirstAndBounded checks that History lists the runs
// newest first, at most as many as asked and as the ledger keeps.
func testHistoryNewestFirstAndBounded(t *testing.T, e LedgerElection) {
	keep := e.History
	if keep == 0 {
		keep = ledger.DefaultHistory
	}
	tok := e.Lead(t)
	n := keep + 3
	for i := range n {
		tick := tick0.Add(time.Duration(i) * time.Minute)
		if err := claim1(t, e.Ledger, ledger.Claim{Job: "report", Tick: tick, Token: tok, Instance: "node-a", Started: tick}); err != nil {
			t.Fatalf("Claim %d: %v", i, err)
		}
	}
	runs := history(t, e.Ledger, "report", n+10)
	if len(runs) != keep {
		t.Fatalf("History kept %d runs, want %d", len(runs), keep)
	}
	for i, r := range runs {
		if want := tick0.Add(time.Duration(n-1-i) * time.Minute); !r.Tick.Equal(want) {
			t.Errorf("History()[%d].Tick = %v, want %v (newest first)", i, r.Tick, want)
		}
	}
	if few := history(t, e.Ledger, "report", 2); len(few) != 2 || !few[0].Tick.Equal(runs[0].Tick) || !few[1].Tick.Equal(runs[1].Tick) {
		t.Errorf("History(2) = %+v, want the 2 newest", few)
	}
}

// testJobWithNoClaims checks that a job never claimed has no last tick and
// no runs, and Finish of one of its runs is ignored.
func testJobWithNoClaims(t *testing.T, e LedgerElection) {
	e.Lead(t)
	lastIs(t, e.Ledger, "never", time.Time{})
	if runs := history(t, e.Ledger, "never", 10); len(runs) != 0 {
		t.Errorf("History of a job never claimed = %+v, want none", runs)
	}
	if err := finish1(t, e.Ledger, ledger.Run{Job: "never", Tick: tick0, Token: 1, Result: ledger.ResultOK}); err != nil {
		t.Errorf("Finish for a job never claimed: %v", err)
	}
}
