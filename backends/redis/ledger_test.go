package redis_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/control/controltest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/ledger/ledgertest"
	"github.com/batonhq/baton/schedulerhost/hosttest"
)

func TestLedgerConformance(t *testing.T) {
	server(t)
	ledgertest.Run(t, func(t *testing.T) ledgertest.Election {
		b := newBackend(t, redis.Config{Election: electionName(t), History: 5, MaxBatch: 7})
		return ledgertest.Election{Ledger: b.Ledger(), Lead: ledgertest.Leader(b), History: 5}
	})
}

// Once per tick across a crash, under each misfire policy, and a deposed
// leader's refused claim, on a real redis-server.
func TestFailoverConformance(t *testing.T) {
	adm := admin(t)
	hosttest.RunFailoverConformance(t, hosttest.Harness{
		Timing: election.Timing{TTL: 6 * time.Second, RenewInterval: time.Second, SafetyMargin: 3500 * time.Millisecond},
		NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) electiontest.Candidate {
			e := electionName(t)
			return func(t *testing.T, name string) electiontest.Candidate {
				p := proxy(t)
				b := newBackend(t, redis.Config{Addr: p.Addr(), Election: e, Timing: timing})
				return electiontest.Candidate{Backend: b, Cut: p.Blackhole, Heal: p.Heal, Ledger: b.Ledger(),
					Depose: func(t *testing.T, l election.Lease) {
						// As an operator would: redis-cli DEL 'baton:{e}:lease'.
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						if err := adm.Del(ctx, b.LeaseKey()).Err(); err != nil {
							t.Fatalf("depose: DEL %s: %v", b.LeaseKey(), err)
						}
					}}
			}
		},
	})
}

// The time of one claim script call by batch size, to choose
// DefaultMaxBatch: the server runs nothing else while a script runs.
func TestClaimBatchTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	b := newBackend(t, redis.Config{Election: electionName(t), MaxBatch: redis.MaxMaxBatch, Logger: slog.New(slog.DiscardHandler)})
	l := electiontest.Acquire(t, b, "a", acquireWithin)
	defer electiontest.Release(t, l)
	led := b.Ledger()
	tick := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	round := 0
	for _, n := range []int{1, 100, 500, 1000, 5000} {
		var best time.Duration
		for r := range 5 {
			round++
			cs := make([]ledger.Claim, n)
			for i := range cs {
				at := tick.Add(time.Duration(round) * time.Second)
				cs[i] = ledger.Claim{Job: fmt.Sprintf("job-%05d", i), Tick: at, Token: l.Token(), Instance: "a", Started: at}
			}
			start := time.Now()
			for i, err := range led.Claim(ctxT(t, 10*time.Second), cs) {
				if err != nil {
					t.Fatalf("claim %d of %d: %v", i, n, err)
				}
			}
			if d := time.Since(start); r == 0 || d < best {
				best = d
			}
		}
		t.Logf("claims per script call %5d: best of 5 %v (%v per claim)", n, best.Round(10*time.Microsecond), (best / time.Duration(n)).Round(time.Microsecond))
	}
}

func TestControlConformance(t *testing.T) {
	server(t)
	controltest.Run(t, func(t *testing.T) controltest.Election {
		b := newBackend(t, redis.Config{Election: electionName(t)})
		return controltest.Election{Store: b.Control(), Lead: ledgertest.Leader(b)}
	})
}

// The operators' actions a Host acknowledged are honoured across lost
// answers (issue 28), on a real redis-server.
func TestHostControl(t *testing.T) {
	hosttest.RunControlConformance(t, hosttest.ControlHarness{
		NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) hosttest.ControlCandidate {
			e := electionName(t)
			return func(t *testing.T, name string) hosttest.ControlCandidate {
				p := proxy(t)
				b := newBackend(t, redis.Config{Addr: p.Addr(), Election: e, Timing: timing})
				return hosttest.ControlCandidate{Candidate: electiontest.Candidate{Backend: b, Cut: p.Blackhole, Heal: p.Heal, Ledger: b.Ledger()},
					Control: b.Control(), Proxy: p}
			}
		},
	})
}
