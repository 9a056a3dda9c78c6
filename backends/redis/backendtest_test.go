package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
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
		Election: backendtest.ElectionHarness{
			NewElection:    proxiedElection,
			TTL:            2 * time.Second,
			HandoverBound:  100 * time.Millisecond,
			CutTrials:      20,
			Handovers:      20,
			FailoverBound:  3 * time.Second,
			FailoverTrials: 3,
			Package:        "github.com/batonhq/baton/backends/redis",
		},
		Ledger: func(t *testing.T) backendtest.LedgerElection {
			return backendtest.LedgerOf(newBackend(t, redis.Config{Election: electionName(t), History: 5, MaxBatch: 7}), 5)
		},
		Control: func(t *testing.T) backendtest.ControlElection {
			return backendtest.ControlOf(newBackend(t, redis.Config{Election: electionName(t)}))
		},
		Failover: backendtest.FailoverHarness{
			Timing: backendtest.WideFailoverTiming,
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.Candidate {
				e := electionName(t)
				return func(t *testing.T, name string) backendtest.Candidate {
					p := proxy(t)
					b := newBackend(t, redis.Config{Addr: p.Addr(), Election: e, Timing: timing})
					return backendtest.FailoverBehind(b, p, func(t *testing.T, l election.Lease) {
						// As an operator would: redis-cli DEL 'baton:{e}:lease'.
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						if err := adm.Del(ctx, b.LeaseKey()).Err(); err != nil {
							t.Fatalf("depose: DEL %s: %v", b.LeaseKey(), err)
						}
					})
				}
			},
		},
		JobControl: backendtest.JobControlHarness{
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) backendtest.JobControlCandidate {
				e := electionName(t)
				return func(t *testing.T, name string) backendtest.JobControlCandidate {
					p := proxy(t)
					b := newBackend(t, redis.Config{Addr: p.Addr(), Election: e, Timing: timing})
					return backendtest.JobControlBehind(b, p)
				}
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
	backendtest.Run(t, backendtest.Harness{
		Election: backendtest.ElectionHarness{
			NewElection: func(t *testing.T) func(t *testing.T, name string) backendtest.Candidate {
				e := electionName(t)
				return func(t *testing.T, name string) backendtest.Candidate {
					b, d := clusterBackend(t, c, redis.Config{Election: e, Timing: election.Timing{TTL: 2 * time.Second}})
					return backendtest.Candidate{Backend: b, Cut: d.Cut, Heal: d.Heal}
				}
			},
			TTL:            2 * time.Second,
			HandoverBound:  100 * time.Millisecond,
			CutTrials:      5,
			Handovers:      5,
			FailoverBound:  3 * time.Second,
			FailoverTrials: 1,
			Package:        "github.com/batonhq/baton/backends/redis",
		},
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
				e := electionName(t)
				return func(t *testing.T, name string) backendtest.Candidate {
					b, d := clusterBackend(t, c, redis.Config{Election: e, Timing: timing})
					return backendtest.Candidate{Backend: b, Cut: d.Cut, Heal: d.Heal, Ledger: b.Ledger(),
						Depose: func(t *testing.T, l election.Lease) {
							ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
							defer cancel()
							if err := adm.Del(ctx, b.LeaseKey()).Err(); err != nil {
								t.Fatalf("depose: DEL %s: %v", b.LeaseKey(), err)
							}
						}}
				}
			},
		},
	})
}

// proxiedElection starts an election of a fresh name whose candidates
// (TTL 2 s) each talk to the server through a proxy of their own.
func proxiedElection(t *testing.T) func(t *testing.T, name string) backendtest.Candidate {
	e := electionName(t)
	return func(t *testing.T, name string) backendtest.Candidate {
		p := proxy(t)
		return backendtest.Behind(newBackend(t, redis.Config{Addr: p.Addr(), Election: e, Timing: election.Timing{TTL: 2 * time.Second}}), p)
	}
}
