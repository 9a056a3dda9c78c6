package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// TestBackend runs the whole conformance suite on embedded etcd: the
// lease rules, the ledger, the control store, once per tick across a
// crash under each misfire policy with a deposed leader's refused claim,
// and the operators' actions a Host acknowledged honoured across lost
// answers (issue 28). Every candidate's traffic goes through a proxy of
// its own.
func TestBackend(t *testing.T) {
	admin := dial(t, server(t).Addr())
	cli := dial(t, server(t).Addr())
	backendtest.Run(t, backendtest.Harness{
		Election: backendtest.ElectionHarness{
			NewElection: func(t *testing.T) func(t *testing.T, name string) backendtest.Candidate {
				pfx := prefix(t)
				return func(t *testing.T, name string) backendtest.Candidate {
					cli, p := proxied(t)
					return backendtest.Candidate{
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
		},
		Ledger: func(t *testing.T) backendtest.LedgerElection {
			b := newBackend(t, cli, prefix(t), 2*time.Second)
			return backendtest.LedgerElection{Ledger: b.Ledger(), Lead: backendtest.Leader(b)}
		},
		Control: func(t *testing.T) backendtest.ControlElection {
			b := newBackend(t, cli, prefix(t), 2*time.Second)
			return backendtest.ControlElection{Store: b.Control(), Lead: backendtest.Leader(b)}
		},
		Failover: backendtest.FailoverHarness{
			// A wide safety margin leaves 3.5 s between the crashed
			// leader's local deadline and the lease's expiry on the
			// server, so the misfire policies can be told apart; the TTL
			// of 6 s leaves a renewal 1.5 s (at TTL 4 s, 0.5 s was missed
			// under ci-loaded, and a leader that lost its term and led
			// again ran a second catch-up).
			Timing: election.Timing{TTL: 6 * time.Second, RenewInterval: time.Second, SafetyMargin: 3500 * time.Millisecond},
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.Candidate {
				pfx := prefix(t)
				return func(t *testing.T, name string) backendtest.Candidate {
					cli, p := proxied(t)
					b, err := etcd.New(etcd.Config{Client: cli, Prefix: pfx, Timing: timing})
					if err != nil {
						t.Fatal(err)
					}
					return backendtest.Candidate{Backend: b, Cut: p.Blackhole, Heal: p.Heal, Ledger: b.Ledger(),
						Depose: func(t *testing.T, l election.Lease) {
							// As an operator would: etcdctl lease revoke <id>.
							_, id, ok := etcd.LeaseKey(l)
							if !ok {
								t.Fatalf("depose: %T is not an etcd lease", l)
							}
							ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
							defer cancel()
							if _, err := admin.Revoke(ctx, id); err != nil {
								t.Fatalf("depose: revoke lease %x: %v", id, err)
							}
						}}
				}
			},
		},
		JobControl: backendtest.JobControlHarness{
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.JobControlCandidate {
				pfx := prefix(t)
				return func(t *testing.T, name string) backendtest.JobControlCandidate {
					cli, p := proxied(t)
					b, err := etcd.New(etcd.Config{Client: cli, Prefix: pfx, Timing: timing})
					if err != nil {
						t.Fatal(err)
					}
					return backendtest.JobControlCandidate{Candidate: backendtest.Candidate{Backend: b, Cut: p.Blackhole, Heal: p.Heal, Ledger: b.Ledger()},
						Control: b.Control(), Network: p}
				}
			},
		},
	})
}
