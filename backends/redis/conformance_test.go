package redis_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
)

func TestConformance(t *testing.T) {
	server(t)
	electiontest.RunConformance(t, electiontest.Harness{
		NewElection: func(t *testing.T) func(t *testing.T, name string) electiontest.Candidate {
			e := electionName(t)
			return func(t *testing.T, name string) electiontest.Candidate {
				p := proxy(t)
				return electiontest.Candidate{
					Backend: newBackend(t, redis.Config{Addr: p.Addr(), Election: e, Timing: election.Timing{TTL: 2 * time.Second}}),
					Cut:     p.Blackhole,
					Heal:    p.Heal,
				}
			}
		},
		TTL:            2 * time.Second,
		HandoverBound:  100 * time.Millisecond,
		CutTrials:      20,
		Handovers:      20,
		FailoverBound:  3 * time.Second,
		FailoverTrials: 3,
		Package:        "github.com/batonhq/baton/backends/redis",
	})
}
