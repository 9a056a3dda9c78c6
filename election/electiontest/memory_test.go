package electiontest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
)

func TestMemory_Conformance(t *testing.T) {
	timing := election.Timing{TTL: 600 * time.Millisecond, RenewInterval: 150 * time.Millisecond, SafetyMargin: 120 * time.Millisecond}
	electiontest.RunConformance(t, electiontest.Harness{
		TTL: timing.TTL,
		NewElection: func(t *testing.T) func(*testing.T, string) electiontest.Candidate {
			m := electiontest.NewMemory(timing)
			return func(t *testing.T, name string) electiontest.Candidate {
				c := m.Candidate()
				return electiontest.Candidate{Backend: c, Cut: c.Cut, Heal: c.Heal}
			}
		},
		HandoverBound: 50 * time.Millisecond,
		Package:       "github.com/batonhq/baton/election",
	})
}

func TestMemory_FailoverConformance(t *testing.T) {
	var mu sync.Mutex
	var stores []*electiontest.Memory
	electiontest.RunFailoverConformance(t, electiontest.LedgerHarness{
		Timing: election.Timing{TTL: 4 * time.Second, RenewInterval: time.Second, SafetyMargin: 2500 * time.Millisecond},
		NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) electiontest.Candidate {
			m := electiontest.NewMemory(timing)
			mu.Lock()
			stores = append(stores, m)
			mu.Unlock()
			return func(t *testing.T, name string) electiontest.Candidate {
				c := m.Candidate()
				return electiontest.Candidate{Backend: c, Cut: c.Cut, Heal: c.Heal, Ledger: m.Ledger()}
			}
		},
		Depose: func(t *testing.T, l election.Lease) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range stores {
				if m.RevokeToken(l.Token()) {
					return
				}
			}
			t.Fatalf("no store holds token %d", l.Token())
		},
	})
}
