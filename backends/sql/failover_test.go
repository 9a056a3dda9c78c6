package sql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
	"github.com/batonhq/baton/schedulerhost/hosttest"
)

// Once per tick across a crash, under each misfire policy, and a deposed
// leader's refused claim (issue: fenced tick ledger), on both servers.
func TestFailoverConformance(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		hosttest.RunFailoverConformance(t, hosttest.Harness{
			// A wide safety margin leaves 3.5 s between the crashed leader's
			// local deadline and the lease's expiry on the server, so the
			// misfire policies can be told apart; the TTL of 6 s leaves a
			// renewal 1.5 s (at TTL 4 s, 0.5 s was missed under ci-loaded, and a
			// leader that lost its term and led again ran a second catch-up).
			Timing: election.Timing{TTL: 6 * time.Second, RenewInterval: time.Second, SafetyMargin: 3500 * time.Millisecond},
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) electiontest.Candidate {
				table := s.newTable(t)
				return func(t *testing.T, name string) electiontest.Candidate {
					c := s.candidate(t, table, "failover", candOpts{timing: &timing})
					return electiontest.Candidate{Backend: c.Backend, Cut: c.proxy.Blackhole, Heal: c.proxy.Heal, Ledger: c.Ledger(),
						Depose: func(t *testing.T, l election.Lease) { s.depose(t, table, l) }}
				}
			},
		})
	})
}

// depose expires the row of l's term by hand, as an operator would.
func (s *server) depose(t *testing.T, table string, l election.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q := "UPDATE %s SET expires_at = expires_at - INTERVAL '1 hour' WHERE token = $1"
	if s.name == "mariadb" {
		q = "UPDATE %s SET expires_at = expires_at - INTERVAL 1 HOUR WHERE token = ?"
	}
	res, err := s.admin.ExecContext(ctx, fmt.Sprintf(q, table), l.Token())
	if err != nil {
		t.Fatalf("depose: %v", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("depose: %d rows hold token %d", n, l.Token())
	}
}
