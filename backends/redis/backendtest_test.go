package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/proxytest"
	"github.com/batonhq/baton/internal/redistest"
)

// The whole conformance suite on a real redis-server: the election
// contract; the ledger and control contracts; once per tick across a
// crash, under each misfire policy, and a deposed leader's refused
// claim (Failover); and the operators' actions a Host acknowledged
// honoured across lost answers (JobControl, issue 28).
func TestBackend(t *testing.T) {
	server(t)
	adm := admin(t)
	backendtest.Run(t, backendtest.Harness{
		Election: electionHarness(proxiedElection, 20, 3),
		Ledger: func(t *testing.T) backendtest.LedgerElection {
			return backendtest.LedgerOf(newBackend(t, redis.Config{Election: electionName(t), History: 5, MaxBatch: 7}), 5)
		},
		Control: func(t *testing.T) backendtest.ControlElection {
			return backendtest.ControlOf(newBackend(t, redis.Config{Election: electionName(t)}))
		},
		Failover: backendtest.FailoverHarness{
			Timing: backendtest.WideFailoverTiming,
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.Candidate {
				return proxied(t, timing, func(b *redis.Backend, p *proxytest.Proxy) backendtest.Candidate {
					return backendtest.FailoverBehind(b, p, depose(adm, b))
				})
			},
		},
		JobControl: backendtest.JobControlHarness{
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.JobControlCandidate {
				return proxied(t, timing, func(b *redis.Backend, p *proxytest.Proxy) backendtest.JobControlCandidate {
					return backendtest.JobControlBehind(b, p)
				})
			},
		},
	})
}

// The election contract, the ledger contract, the control contract and
// the Host's failover guarantees against a Redis Cluster of three
// primaries: the election's keys share one slot, so one shard serves it
// all. JobControl is left out (its subtest skips): a candidate's path
// is a cutDialer, which cuts but cannot hold replies, so it is no
// backendtest.Network.
func TestBackend_Cluster(t *testing.T) {
	c := redistest.StartCluster(t)
	adm := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), DisableIdentity: true})
	t.Cleanup(func() { adm.Close() })
	// clustered starts an election of a fresh name whose candidates each
	// reach the cluster through a cutDialer of their own; with deposer
	// (not nil) they have their ledger and are deposed through it.
	clustered := func(t *testing.T, timing election.Timing, deposer goredis.Cmdable) func(*testing.T, string) backendtest.Candidate {
		e := electionName(t)
		return func(t *testing.T, _ string) backendtest.Candidate {
			b, d := clusterBackend(t, c, redis.Config{Election: e, Timing: timing})
			cand := backendtest.Candidate{Backend: b, Cut: d.Cut, Heal: d.Heal}
			if deposer != nil {
				cand.Ledger, cand.Depose = b.Ledger(), depose(deposer, b)
			}
			return cand
		}
	}
	backendtest.Run(t, backendtest.Harness{
		Election: electionHarness(func(t *testing.T) func(t *testing.T, name string) backendtest.Candidate {
			return clustered(t, election.Timing{TTL: 2 * time.Second}, nil)
		}, 5, 1),
		Ledger: func(t *testing.T) backendtest.LedgerElection {
			b, _ := clusterBackend(t, c, redis.Config{Election: electionName(t), History: 5, MaxBatch: 7})
			return backendtest.LedgerOf(b, 5)
		},
		Control: func(t *testing.T) backendtest.ControlElection {
			b, _ := clusterBackend(t, c, redis.Config{Election: electionName(t)})
			return backendtest.ControlOf(b)
		},
		Failover: backendtest.FailoverHarness{
			Timing: backendtest.WideFailoverTiming,
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.Candidate {
				return clustered(t, timing, adm)
			},
		},
	})
}

// electionHarness is the election contract's harness of both
// topologies: candidates of newElection with a 2 s TTL, trials cuts and
// as many handovers, and failoverTrials failovers.
func electionHarness(newElection func(*testing.T) func(*testing.T, string) backendtest.Candidate, trials, failoverTrials int) backendtest.ElectionHarness {
	return backendtest.ElectionHarness{
		NewElection:    newElection,
		TTL:            2 * time.Second,
		HandoverBound:  100 * time.Millisecond,
		CutTrials:      trials,
		Handovers:      trials,
		FailoverBound:  3 * time.Second,
		FailoverTrials: failoverTrials,
		Package:        "github.com/batonhq/baton/backends/redis",
	}
}

// depose returns a Depose of a candidate on b that does as an operator
// would, with adm: redis-cli DEL 'baton:{e}:lease'.
func depose(adm goredis.Cmdable, b *redis.Backend) func(*testing.T, election.Lease) {
	return func(t *testing.T, _ election.Lease) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := adm.Del(ctx, b.LeaseKey()).Err(); err != nil {
			t.Fatalf("depose: DEL %s: %v", b.LeaseKey(), err)
		}
	}
}

// proxied starts an election of a fresh name whose candidates each talk
// to the server through a proxy of their own; as makes a candidate of
// the harness's kind of each backend and its proxy.
func proxied[C any](t *testing.T, timing election.Timing, as func(*redis.Backend, *proxytest.Proxy) C) func(*testing.T, string) C {
	e := electionName(t)
	return func(t *testing.T, _ string) C {
		p := proxy(t)
		return as(newBackend(t, redis.Config{Addr: p.Addr(), Election: e, Timing: timing}), p)
	}
}

// proxiedElection starts an election of a fresh name whose candidates
// (TTL 2 s) each talk to the server through a proxy of their own.
func proxiedElection(t *testing.T) func(t *testing.T, name string) backendtest.Candidate {
	return proxied(t, election.Timing{TTL: 2 * time.Second}, func(b *redis.Backend, p *proxytest.Proxy) backendtest.Candidate {
		return backendtest.Behind(b, p)
	})
}
