package redis_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/execjob/killtest"
)

// A command job that traps SIGTERM is gone before the next leader starts
// it, when its leader is cut off from Redis (issue 28, section 1).
func TestLostTerm_CommandGoneBeforeNextLeader(t *testing.T) {
	killtest.RunLostTerm(t, 3, func(t *testing.T) func(*testing.T, string) backendtest.Candidate {
		e := electionName(t)
		return func(t *testing.T, name string) backendtest.Candidate {
			p := proxy(t)
			b := newBackend(t, redis.Config{Addr: p.Addr(), Election: e, Timing: election.Timing{TTL: 2 * time.Second}})
			return backendtest.Candidate{Backend: b, Cut: p.Blackhole, Heal: p.Heal}
		}
	})
}
