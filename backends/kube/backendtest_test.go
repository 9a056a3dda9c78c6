package kube_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// The election contract on a real kube-apiserver.
func TestBackend(t *testing.T) {
	server(t)
	ttl := 3 * time.Second
	backendtest.RunElection(t, backendtest.ElectionHarness{
		NewElection: func(t *testing.T) func(t *testing.T, name string) backendtest.Candidate {
			name := leaseName(t)
			return func(t *testing.T, _ string) backendtest.Candidate {
				p := proxy(t)
				return backendtest.Candidate{
					Backend: newBackend(t, kube.Config{Client: client(t, p.Addr()), Name: name, Timing: election.Timing{TTL: ttl}}),
					Cut:     p.Blackhole,
					Heal:    p.Heal,
				}
			}
		},
		TTL:           ttl,
		HandoverBound: 100 * time.Millisecond,
		CutTrials:     10,
		Handovers:     20,
		// A candidate that watched the last renewal takes the Lease a TTL
		// after it saw it.
		FailoverBound:  ttl + time.Second,
		FailoverTrials: 3,
		Package:        "github.com/batonhq/baton/backends/kube",
	})
}
