package hosttest_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
	"github.com/batonhq/baton/schedulerhost/hosttest"
)

// The in-memory backend runs the failover suite, as every backend does.
func TestMemory_FailoverConformance(t *testing.T) {
	hosttest.RunFailoverConformance(t, hosttest.Harness{
		Timing: election.Timing{TTL: 4 * time.Second, RenewInterval: time.Second, SafetyMargin: 2500 * time.Millisecond},
		NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) electiontest.Candidate {
			m := memory.New(timing)
			return func(t *testing.T, name string) electiontest.Candidate {
				c := m.Candidate()
				return electiontest.Candidate{Backend: c, Cut: c.Cut, Heal: c.Heal, Ledger: m.Ledger(),
					Depose: func(t *testing.T, l election.Lease) {
						if !m.RevokeToken(l.Token()) {
							t.Fatalf("token %d does not hold", l.Token())
						}
					}}
			}
		},
	})
}
