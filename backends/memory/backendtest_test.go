package memory_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// The in-memory backend runs the whole conformance suite, as every
// backend does.
func TestBackend(t *testing.T) {
	timing := election.Timing{TTL: 600 * time.Millisecond, RenewInterval: 150 * time.Millisecond, SafetyMargin: 120 * time.Millisecond}
	backendtest.Run(t, backendtest.Harness{
		Election: backendtest.ElectionHarness{
			TTL: timing.TTL,
			NewElection: func(t *testing.T) func(*testing.T, string) backendtest.Candidate {
				m := memory.New(timing)
				return func(t *testing.T, name string) backendtest.Candidate {
					c := m.Candidate()
					return backendtest.Candidate{Backend: c, Cut: c.Cut, Heal: c.Heal}
				}
			},
			HandoverBound: 50 * time.Millisecond,
			Handovers:     6,
			// The store expires a lease TTL after its last renewal.
			FailoverBound:  timing.TTL + time.Second,
			FailoverTrials: 3,
			Package:        "github.com/batonhq/baton/backends/memory",
		},
		Ledger: func(t *testing.T) backendtest.LedgerElection {
			m := memory.New(election.Timing{})
			return backendtest.LedgerElection{Ledger: m.Ledger(), Lead: backendtest.Leader(m.Candidate())}
		},
		Control: func(t *testing.T) backendtest.ControlElection {
			m := memory.New(election.Timing{})
			return backendtest.ControlElection{Store: m.Control(), Lead: backendtest.Leader(m.Candidate())}
		},
		Failover: backendtest.FailoverHarness{
			Timing: election.Timing{TTL: 4 * time.Second, RenewInterval: time.Second, SafetyMargin: 2500 * time.Millisecond},
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.Candidate {
				m := memory.New(timing)
				return func(t *testing.T, name string) backendtest.Candidate {
					c := m.Candidate()
					return backendtest.Candidate{Backend: c, Cut: c.Cut, Heal: c.Heal, Ledger: m.Ledger(),
						Depose: func(t *testing.T, l election.Lease) {
							if !m.RevokeToken(l.Token()) {
								t.Fatalf("token %d does not hold", l.Token())
							}
						}}
				}
			},
		},
	})
}
