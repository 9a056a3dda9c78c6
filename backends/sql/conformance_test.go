package sql_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/election/electiontest"
)

// The conformance runs are not parallel: the suite checks that no goroutine
// of this package is left after Release, which a parallel test of the same
// package would break. Go runs them before every parallel test.

// The handover bound is a wake-up (NOTIFY on PostgreSQL, the next poll on
// MariaDB) and two round trips, with room for a loaded machine: under
// ci-loaded 100 ms was missed at 538 ms. How fast a handover is, is make
// bench's question (graceful handover p50/p99).

func TestConformance_Postgres(t *testing.T) {
	conformance(t, getServer(t, "postgres"), pgPoll+time.Second)
}

func TestConformance_MariaDB(t *testing.T) {
	conformance(t, getServer(t, "mariadb"), myPoll+time.Second)
}

func conformance(t *testing.T, s *server, handover time.Duration) {
	electiontest.RunConformance(t, electiontest.Harness{
		NewElection: func(t *testing.T) func(t *testing.T, name string) electiontest.Candidate {
			table := s.newTable(t)
			return func(t *testing.T, name string) electiontest.Candidate {
				c := s.candidate(t, table, "conformance", candOpts{})
				return electiontest.Candidate{Backend: c.Backend, Cut: c.proxy.Blackhole, Heal: c.proxy.Heal}
			}
		},
		TTL:           testTTL,
		HandoverBound: handover,
		CutTrials:     20,
		Handovers:     6,
		// The leader stops renewing without releasing; a waiting
		// candidate leads within TTL + PollInterval + 1s of the cut.
		FailoverBound:  testTTL + s.poll + time.Second,
		FailoverTrials: 3,
		Package:        "github.com/batonhq/baton/backends/sql",
	})
}
