package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/proxytest"
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
			NewElection:   proxiedElection,
			TTL:           2 * time.Second,
			HandoverBound: 100 * time.Millisecond,
			CutTrials:     20,
			Package:       "github.com/batonhq/baton/backends/etcd",
		},
		Ledger: func(t *testing.T) backendtest.LedgerElection {
			return backendtest.LedgerOf(newBackend(t, cli, prefix(t), 2*time.Second), 0)
		},
		Control: func(t *testing.T) backendtest.ControlElection {
			return backendtest.ControlOf(newBackend(t, cli, prefix(t), 2*time.Second))
		},
		Failover: backendtest.FailoverHarness{
			Timing: backendtest.WideFailoverTiming,
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.Candidate {
				pfx := prefix(t)
				return func(t *testing.T, name string) backendtest.Candidate {
					b, p := timedBackend(t, pfx, timing)
					return backendtest.FailoverBehind(b, p, func(t *testing.T, l election.Lease) {
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
					})
				}
			},
		},
		JobControl: backendtest.JobControlHarness{
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.JobControlCandidate {
				pfx := prefix(t)
				return func(t *testing.T, name string) backendtest.JobControlCandidate {
					b, p := timedBackend(t, pfx, timing)
					return backendtest.JobControlBehind(b, p)
				}
			},
		},
	})
}

// timedBackend is a Backend of the election pfx at timing whose client
// goes through a proxy of its own.
func timedBackend(t *testing.T, pfx string, timing election.Timing) (*etcd.Backend, *proxytest.Proxy) {
	cli, p := proxied(t)
	b, err := etcd.New(etcd.Config{Client: cli, Prefix: pfx, Timing: timing})
	if err != nil {
		t.Fatal(err)
	}
	return b, p
}

// proxiedElection starts an election under a fresh prefix whose
// candidates (TTL 2 s) each talk to etcd through a proxy of their own.
func proxiedElection(t *testing.T) func(t *testing.T, name string) backendtest.Candidate {
	pfx := prefix(t)
	return func(t *testing.T, name string) backendtest.Candidate {
		cli, p := proxied(t)
		return backendtest.Behind(newBackend(t, cli, pfx, 2*time.Second), p)
	}
}
