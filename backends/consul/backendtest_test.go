package consul_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// cutTrials is how many network-cut trials the conformance suite runs:
// each takes about 2*TTL + LockDelay (30 s at the defaults) on Consul,
// which reaps a session 2*TTL after its last renewal and then keeps the
// key for the lock-delay. BATON_CONSUL_CUT_TRIALS overrides it.
func cutTrials() int {
	if n, err := strconv.Atoi(os.Getenv("BATON_CONSUL_CUT_TRIALS")); err == nil && n > 0 {
		return n
	}
	return 5
}

// TestBackend runs the whole conformance suite (backendtest.Run) on the
// package's shared agent, each candidate behind its own fault proxy.
//
// Election: the lease rules, at the default timing.
//
// Ledger and Control: the claims, history and Finish rules common to every
// ledger, and the rules common to every control store; the ledger tests
// in ledger_test.go are Consul's own.
//
// Failover: once per tick across a crash, under each misfire policy, and
// a deposed leader's refused claim, on a real agent, at the default
// timing. Consul reaps a session only 2*TTL after its last renewal and
// then keeps the key for the lock-delay (the TTL), so the gap is long:
// 27-30 s at TTL 10 s. The deposed leader's session is destroyed, which
// starts the lock-delay too: the next leader starts only after the
// deposed one's deadline, and the deposed one's claim is refused all the
// same.
//
// JobControl: a run-now take applied by the agent whose answer was held
// until the client timed out, or resent, runs once; a pause acknowledged
// during a run's jitter stops the run. Each candidate's proxy holds the
// replies.
func TestBackend(t *testing.T) {
	a := sharedAgent(t)
	admin := agentClient(t, a, a.HTTPAddr, "")
	backendtest.Run(t, backendtest.Harness{
		Election: backendtest.ElectionHarness{
			NewElection: func(t *testing.T) func(t *testing.T, name string) backendtest.Candidate {
				key := newKey(t)
				return func(t *testing.T, name string) backendtest.Candidate {
					c := newCandidate(t, a, key)
					return backendtest.Behind(c.Backend, c.proxy)
				}
			},
			TTL:       consul.DefaultTTL,
			CutTrials: cutTrials(),
			Handovers: 8,
			// Consul reaps a session 2*TTL after its last renewal, then
			// refuses the key for LockDelay (the TTL): 31 s at the defaults.
			FailoverBound: 2*consul.DefaultTTL + defaultLockDelay + time.Second,
			Package:       "github.com/batonhq/baton/backends/consul",
		},
		Ledger: func(t *testing.T) backendtest.LedgerElection {
			return backendtest.LedgerOf(newCandidate(t, a, newKey(t)).Backend, 0)
		},
		Control: func(t *testing.T) backendtest.ControlElection {
			return backendtest.ControlOf(newCandidate(t, a, newKey(t)).Backend)
		},
		Failover: backendtest.FailoverHarness{
			Timing: election.Timing{TTL: consul.DefaultTTL},
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.Candidate {
				key := newKey(t)
				return func(t *testing.T, name string) backendtest.Candidate {
					p := proxyTo(t, a)
					b := backendOn(t, agentClient(t, a, p.Addr(), ""), key, func(c *consul.Config) { c.Timing = timing })
					return backendtest.FailoverBehind(b, p, func(t *testing.T, l election.Lease) {
						// As an operator would: destroy the holder's session.
						pair, _, err := admin.KV().Get(key, nil)
						if err != nil || pair == nil || pair.Session == "" {
							t.Fatalf("depose: read %s: %v (%+v)", key, err, pair)
						}
						if _, err := admin.Session().Destroy(pair.Session, nil); err != nil {
							t.Fatalf("depose: destroy session: %v", err)
						}
					})
				}
			},
		},
		// JobControl: operators' actions whose answers the network lost
		// (issue 28), each candidate's HTTP through its own proxy.
		JobControl: backendtest.JobControlHarness{
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.JobControlCandidate {
				key := newKey(t)
				return func(t *testing.T, name string) backendtest.JobControlCandidate {
					p := proxyTo(t, a)
					b := backendOn(t, agentClient(t, a, p.Addr(), ""), key, func(c *consul.Config) { c.Timing = timing })
					return backendtest.JobControlBehind(b, p)
				}
			},
		},
	})
}
