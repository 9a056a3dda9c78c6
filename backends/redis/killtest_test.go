package redis_test

import (
	"testing"

	"github.com/batonhq/baton/internal/execjob/killtest"
)

// A command job that traps SIGTERM is gone before the next leader starts
// it, when its leader is cut off from Redis (issue 28, section 1).
func TestLostTerm_CommandGoneBeforeNextLeader(t *testing.T) {
	killtest.RunLostTerm(t, 3, proxiedElection)
}
