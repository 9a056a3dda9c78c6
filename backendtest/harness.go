package backendtest

import (
	"testing"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

// The pieces a backend's Harness is made of, where they are the same for
// every backend: a Backend with its ledger, its control store, and the
// Network its candidate's traffic goes through.

// LedgerBackend is a Backend with its tick ledger (driver.Ledgerer).
type LedgerBackend interface {
	driver.Backend
	driver.Ledgerer
}

// ControlBackend is a Backend with its tick ledger and its control store
// (driver.Controller).
type ControlBackend interface {
	LedgerBackend
	driver.Controller
}

// WideFailoverTiming is a FailoverHarness.Timing for a backend whose
// server expires a lease: a wide safety margin leaves 3.5 s between the
// crashed leader's local deadline and the lease's expiry on the server, so
// the misfire policies can be told apart; the TTL of 6 s leaves a renewal
// 1.5 s (at TTL 4 s, 0.5 s was missed under ci-loaded, and a leader that
// lost its term and led again ran a second catch-up).
var WideFailoverTiming = election.Timing{TTL: 6 * time.Second, RenewInterval: time.Second, SafetyMargin: 3500 * time.Millisecond}

// LedgerOf is the LedgerElection of b for Harness.Ledger: b's ledger,
// whose terms Leader(b) takes, keeping history runs per job (zero:
// ledger.DefaultHistory).
func LedgerOf(b LedgerBackend, history int) LedgerElection {
	return LedgerElection{Ledger: b.Ledger(), Lead: Leader(b), History: history}
}

// ControlOf is the ControlElection of b for Harness.Control: b's control
// store, whose terms Leader(b) takes.
func ControlOf(b interface {
	driver.Backend
	driver.Controller
}) ControlElection {
	return ControlElection{Store: b.Control(), Lead: Leader(b)}
}

// Behind is the election Candidate b whose traffic goes through n: Cut
// blackholes n, Heal heals it.
func Behind(b election.Backend, n Network) Candidate {
	return Candidate{Backend: b, Cut: n.Blackhole, Heal: n.Heal}
}

// FailoverBehind is the Candidate b behind n (Behind) with b's ledger, for
// RunFailover; depose is its Depose (nil: none).
func FailoverBehind(b LedgerBackend, n Network, depose func(t *testing.T, lease election.Lease)) Candidate {
	c := Behind(b, n)
	c.Ledger, c.Depose = b.Ledger(), depose
	return c
}

// JobControlBehind is the JobControlCandidate b behind n, with b's ledger
// and control store, for RunJobControl.
func JobControlBehind(b ControlBackend, n Network) JobControlCandidate {
	return JobControlCandidate{Candidate: FailoverBehind(b, n, nil), Control: b.Control(), Network: n}
}
