package etcd_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/election/electiontest"
)

func TestConformance(t *testing.T) {
	server(t)
	electiontest.RunConformance(t, electiontest.Harness{
		NewElection: func(t *testing.T) func(t *testing.T, name string) electiontest.Candidate {
			pfx := prefix(t)
			return func(t *testing.T, name string) electiontest.Candidate {
				cli, p := proxied(t)
				return electiontest.Candidate{
					Backend: newBackend(t, cli, pfx, 2*time.Second),
					Cut:     p.Blackhole,
					Heal:    p.Heal,
				}
			}
		},
		TTL:           2 * time.Second,
		HandoverBound: 100 * time.Millisecond,
		CutTrials:     20,
		Package:       "github.com/batonhq/baton/backends/etcd",
	})
}
