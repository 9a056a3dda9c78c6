package etcd_test

import (
	"testing"

	"github.com/batonhq/baton/internal/execjob/killtest"
)

// A command job whose work runs in a session of its own (setsid, a
// double fork) leaves none of it running when its leader is cut off
// from the backend: by the next leader's start, every process of the
// old run is gone, in a cgroup of its own where the machine allows one
// and by the fallback's search of /proc without (issue 50, section 2).
func TestLostTerm_EscapedProcessesGoneBeforeNextLeader(t *testing.T) {
	t.Run("cgroup", func(t *testing.T) { killtest.RunLostTermEscaping(t, 3, lostTermElection) })
	t.Run("fallback", func(t *testing.T) {
		t.Setenv("BATON_CGROUPS", "off")
		killtest.RunLostTermEscaping(t, 3, lostTermElection)
	})
}
