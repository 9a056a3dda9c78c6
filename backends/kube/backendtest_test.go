package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// The whole conformance suite on a real kube-apiserver: the election
// contract; the ledger and control contracts on the fenced ConfigMaps;
// once per tick across a crash, under each misfire policy, and a deposed
// leader's refused claim (Failover: the Lease deleted, as an operator's
// kubectl delete lease would); the operators' actions across lost
// answers (JobControl).
func TestBackend(t *testing.T) {
	server(t)
	ttl := 3 * time.Second
	backendtest.Run(t, backendtest.Harness{
		Election: backendtest.ElectionHarness{
			NewElection: func(t *testing.T) func(t *testing.T, name string) backendtest.Candidate {
				name := leaseName(t)
				return func(t *testing.T, _ string) backendtest.Candidate {
					p := proxy(t)
					return backendtest.Behind(newBackend(t, kube.Config{Client: client(t, p.Addr()), Name: name, Timing: election.Timing{TTL: ttl}}), p)
				}
			},
			TTL: ttl,
			// The waiting candidate watches the Lease: a handover takes
			// about 20 ms (median of 20), where a candidate without the
			// watch would look again only when the holder's record
			// expires, a TTL later. The bound tells the two apart with
			// room for a loaded machine: beside a kube soak, one handover
			// in 20 took 111 ms. How fast a handover is, is make bench's
			// question.
			HandoverBound: 500 * time.Millisecond,
			CutTrials:     10,
			Handovers:     20,
			// A candidate that watched the last renewal takes the Lease a TTL
			// after it saw it.
			FailoverBound:  ttl + time.Second,
			FailoverTrials: 3,
			Package:        "github.com/batonhq/baton/backends/kube",
		},
		Ledger: func(t *testing.T) backendtest.LedgerElection {
			return backendtest.LedgerOf(newBackend(t, kube.Config{Name: leaseName(t), History: 5}), 5)
		},
		Control: func(t *testing.T) backendtest.ControlElection {
			return backendtest.ControlOf(newBackend(t, kube.Config{Name: leaseName(t)}))
		},
		Failover: backendtest.FailoverHarness{
			Timing: backendtest.WideFailoverTiming,
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.Candidate {
				name := leaseName(t)
				return func(t *testing.T, _ string) backendtest.Candidate {
					p := proxy(t)
					b := newBackend(t, kube.Config{Client: client(t, p.Addr()), Name: name, Timing: timing})
					return backendtest.FailoverBehind(b, p, func(t *testing.T, l election.Lease) {
						// As an operator would: kubectl delete lease NAME.
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						if err := kube.DeleteLease(ctx, client(t, ""), "default", name); err != nil {
							t.Fatalf("depose: delete lease %s: %v", name, err)
						}
					})
				}
			},
		},
		JobControl: backendtest.JobControlHarness{
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.JobControlCandidate {
				name := leaseName(t)
				return func(t *testing.T, _ string) backendtest.JobControlCandidate {
					p := proxy(t)
					b := newBackend(t, kube.Config{Client: client(t, p.Addr()), Name: name, Timing: timing})
					return backendtest.JobControlBehind(b, p)
				}
			},
		},
	})
}
