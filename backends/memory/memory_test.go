package memory_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control/controltest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
	"github.com/batonhq/baton/ledger/ledgertest"
)

func TestMemory_Conformance(t *testing.T) {
	timing := election.Timing{TTL: 600 * time.Millisecond, RenewInterval: 150 * time.Millisecond, SafetyMargin: 120 * time.Millisecond}
	electiontest.RunConformance(t, electiontest.Harness{
		TTL: timing.TTL,
		NewElection: func(t *testing.T) func(*testing.T, string) electiontest.Candidate {
			m := memory.New(timing)
			return func(t *testing.T, name string) electiontest.Candidate {
				c := m.Candidate()
				return electiontest.Candidate{Backend: c, Cut: c.Cut, Heal: c.Heal}
			}
		},
		HandoverBound: 50 * time.Millisecond,
		Handovers:     6,
		// The store expires a lease TTL after its last renewal.
		FailoverBound:  timing.TTL + time.Second,
		FailoverTrials: 3,
		Package:        "github.com/batonhq/baton/election",
	})
}

func TestMemory_LedgerConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Election {
		m := memory.New(election.Timing{})
		return ledgertest.Election{Ledger: m.Ledger(), Lead: ledgertest.Leader(m.Candidate())}
	})
}

func TestMemoryControl(t *testing.T) {
	controltest.Run(t, func(t *testing.T) controltest.Election {
		m := memory.New(election.Timing{})
		return controltest.Election{Store: m.Control(), Lead: ledgertest.Leader(m.Candidate())}
	})
}
