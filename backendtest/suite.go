package backendtest

import "testing"

// Harness describes one backend to the whole suite: how to make fresh
// elections of each kind the parts need. Run runs a subtest per part.
type Harness struct {
	// Election: the lease rules (RunElection). Required.
	Election ElectionHarness
	// Ledger makes a fresh election with its tick ledger (RunLedger).
	// Required: a backend without a ledger cannot run a scheduler.
	Ledger func(t *testing.T) LedgerElection
	// Control makes a fresh election with its control store
	// (RunControl). Nil for a backend without one; its subtest then says
	// so and skips.
	Control func(t *testing.T) ControlElection
	// Failover: real schedulerhost Hosts across a crash, per misfire
	// policy, and a deposed leader's claim (RunFailover). Required.
	Failover FailoverHarness
	// JobControl: operators' actions whose answers the network lost
	// (RunJobControl). Its NewElection nil skips the subtest, saying so.
	JobControl JobControlHarness
}

// Run runs the whole conformance suite against the backend h describes,
// one part after another, each a subtest of t: Election, Ledger,
// Control, Failover and JobControl. A required part that h leaves out
// fails the test.
func Run(t *testing.T, h Harness) {
	t.Run("Election", func(t *testing.T) {
		if h.Election.NewElection == nil {
			t.Fatal("Harness.Election.NewElection is nil: every backend runs the election suite")
		}
		RunElection(t, h.Election)
	})
	t.Run("AcquireErrors", func(t *testing.T) { RunAcquireErrors(t, h.Election) })
	t.Run("Ledger", func(t *testing.T) {
		if h.Ledger == nil {
			t.Fatal("Harness.Ledger is nil: every backend runs the ledger suite")
		}
		RunLedger(t, h.Ledger)
	})
	t.Run("Control", func(t *testing.T) {
		if h.Control == nil {
			t.Skip("Harness.Control is nil: this backend has no control store")
		}
		RunControl(t, h.Control)
	})
	t.Run("Failover", func(t *testing.T) {
		if h.Failover.NewElection == nil {
			t.Fatal("Harness.Failover.NewElection is nil: every backend runs the failover suite")
		}
		RunFailover(t, h.Failover)
	})
	t.Run("JobControl", func(t *testing.T) {
		if h.JobControl.NewElection == nil {
			t.Skip("Harness.JobControl.NewElection is nil: the lost-answer suite needs a Network per candidate")
		}
		RunJobControl(t, h.JobControl)
	})
}
