package etcd_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/internal/execjob/killtest"
)

// A command job that traps SIGTERM is gone before the next leader starts
// it, when its leader is cut off from etcd (issue 28, section 1).
func TestLostTerm_CommandGoneBeforeNextLeader(t *testing.T) {
	killtest.RunLostTerm(t, 3, func(t *testing.T) func(*testing.T, string) backendtest.Candidate {
		pfx := prefix(t)
		return func(t *testing.T, name string) backendtest.Candidate {
			cli, p := proxied(t)
			return backendtest.Candidate{Backend: newBackend(t, cli, pfx, 2*time.Second), Cut: p.Blackhole, Heal: p.Heal}
		}
	})
}
