package consul_test

import (
	"testing"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
	"github.com/batonhq/baton/schedulerhost/hosttest"
)

// Once per tick across a crash, under each misfire policy, and a deposed
// leader's refused claim, on a real agent, at the default timing. Consul
// reaps a session only 2*TTL after its last renewal and then keeps the key
// for the lock-delay (the TTL), so the gap is long: 27-30 s at TTL 10 s.
// The deposed leader's session is destroyed, which starts the lock-delay
// too: the next leader starts only after the deposed one's deadline, and
// the deposed one's claim is refused all the same.
func TestFailoverConformance(t *testing.T) {
	a := sharedAgent(t)
	admin := agentClient(t, a, a.HTTPAddr, "")
	hosttest.RunFailoverConformance(t, hosttest.Harness{
		Timing: election.Timing{TTL: consul.DefaultTTL},
		NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) electiontest.Candidate {
			key := newKey(t)
			return func(t *testing.T, name string) electiontest.Candidate {
				p := proxyTo(t, a)
				b := backendOn(t, agentClient(t, a, p.Addr(), ""), key, func(c *consul.Config) { c.Timing = timing })
				return electiontest.Candidate{Backend: b, Cut: p.Blackhole, Heal: p.Heal, Ledger: b.Ledger(),
					Depose: func(t *testing.T, l election.Lease) {
						// As an operator would: destroy the holder's session.
						pair, _, err := admin.KV().Get(key, nil)
						if err != nil || pair == nil || pair.Session == "" {
							t.Fatalf("depose: read %s: %v (%+v)", key, err, pair)
						}
						if _, err := admin.Session().Destroy(pair.Session, nil); err != nil {
							t.Fatalf("depose: destroy session: %v", err)
						}
					}}
			}
		},
	})
}
