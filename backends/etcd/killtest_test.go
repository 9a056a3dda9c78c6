package etcd_test

import (
	"testing"

	"github.com/batonhq/baton/internal/execjob/killtest"
)

// A command job that traps SIGTERM is gone before the next leader starts
// it, when its leader is cut off from etcd (issue 28, section 1).
func TestLostTerm_CommandGoneBeforeNextLeader(t *testing.T) {
	killtest.RunLostTerm(t, 3, lostTermElection)
}

// lostTermElection is proxiedElection for the killtest trials: each
// candidate's backend behind its own proxy, with the proxy's cut and heal.
func lostTermElection(t *testing.T) func(t *testing.T, name string) killtest.Candidate {
	candidate := proxiedElection(t)
	return func(t *testing.T, name string) killtest.Candidate {
		c := candidate(t, name)
		return killtest.Candidate{Backend: c.Backend, Cut: c.Cut, Heal: c.Heal}
	}
}
