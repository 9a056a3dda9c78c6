package redis_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/control/controltest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
	"github.com/batonhq/baton/internal/faultproxy"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/ledger/ledgertest"
	"github.com/batonhq/baton/schedulerhost/hosttest"
)

// cutDialer is a candidate's own network path to a Cluster: a Cluster
// client learns the nodes' addresses from the servers, so one proxy in
// front of a seed node would not carry its traffic. The dialer (through
// Config.Dialer) sends each connection through a fault proxy of this
// candidate for that node, made on first use; Cut blackholes them all.
type cutDialer struct {
	mu      sync.Mutex
	cut     bool
	proxies map[string]*faultproxy.Proxy
}

func newCutDialer(t *testing.T) *cutDialer {
	d := &cutDialer{proxies: map[string]*faultproxy.Proxy{}}
	t.Cleanup(d.close) // after the Backend's Close, registered later
	return d
}

func (d *cutDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	p := d.proxies[addr]
	if p == nil {
		var err error
		if p, err = faultproxy.New(addr); err != nil {
			d.mu.Unlock()
			return nil, err
		}
		if d.cut {
			p.Blackhole()
		}
		d.proxies[addr] = p
	}
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, p.Addr())
}

func (d *cutDialer) each(f func(*faultproxy.Proxy), cut bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = cut
	for _, p := range d.proxies {
		f(p)
	}
}

func (d *cutDialer) Cut()  { d.each((*faultproxy.Proxy).Blackhole, true) }
func (d *cutDialer) Heal() { d.each((*faultproxy.Proxy).Heal, false) }
func (d *cutDialer) close() {
	d.each(func(p *faultproxy.Proxy) { p.Close() }, false)
}

// The election contract, the ledger contract and the Host's failover
// guarantees against a Redis Cluster of three primaries: the election's
// keys share one slot, so one shard serves it all.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	cluster := func(t *testing.T, cfg redis.Config) (*redis.Backend, *cutDialer) {
		d := newCutDialer(t)
		cfg.ClusterAddrs, cfg.Dialer = c.Addrs(), d.dial
		return newBackend(t, cfg), d
	}
	t.Run("Check", func(t *testing.T) {
		b, _ := cluster(t, redis.Config{Election: electionName(t)})
		if err := b.Check(ctxT(t, 5*time.Second)); err != nil {
			t.Fatalf("Check: %v", err)
		}
	})
	t.Run("WaitWithoutReplicas", func(t *testing.T) {
		// No replica: every write fails closed, on the slot's primary.
		b, _ := cluster(t, redis.Config{Election: electionName(t), WaitReplicas: 1})
		if err := b.Check(ctxT(t, 5*time.Second)); !errors.Is(err, redis.ErrNotReplicated) {
			t.Errorf("Check: %v, want ErrNotReplicated", err)
		}
		if l, err := b.Acquire(ctxT(t, 2*time.Second), electiontest.TestIdentity("a")); err == nil {
			l.Release(context.Background()) //nolint:errcheck // the test failed already
			t.Errorf("Acquire without a replica to acknowledge: a lease, want none")
		}
	})
	t.Run("Conformance", func(t *testing.T) {
		electiontest.RunConformance(t, electiontest.Harness{
			NewElection: func(t *testing.T) func(t *testing.T, name string) electiontest.Candidate {
				e := electionName(t)
				return func(t *testing.T, name string) electiontest.Candidate {
					b, d := cluster(t, redis.Config{Election: e, Timing: election.Timing{TTL: 2 * time.Second}})
					return electiontest.Candidate{Backend: b, Cut: d.Cut, Heal: d.Heal}
				}
			},
			TTL:            2 * time.Second,
			HandoverBound:  100 * time.Millisecond,
			CutTrials:      5,
			Handovers:      5,
			FailoverBound:  3 * time.Second,
			FailoverTrials: 1,
			Package:        "github.com/batonhq/baton/backends/redis",
		})
	})
	t.Run("Ledger", func(t *testing.T) {
		ledgertest.Run(t, func(t *testing.T) ledgertest.Election {
			b, _ := cluster(t, redis.Config{Election: electionName(t), History: 5, MaxBatch: 7})
			return ledgertest.Election{Ledger: b.Ledger(), Lead: ledgertest.Leader(b), History: 5}
		})
	})
	t.Run("Control", func(t *testing.T) {
		controltest.Run(t, func(t *testing.T) controltest.Election {
			b, _ := cluster(t, redis.Config{Election: electionName(t)})
			return controltest.Election{Store: b.Control(), Lead: ledgertest.Leader(b)}
		})
	})
	t.Run("Failover", func(t *testing.T) {
		adm := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), DisableIdentity: true})
		t.Cleanup(func() { adm.Close() })
		hosttest.RunFailoverConformance(t, hosttest.Harness{
			Timing: election.Timing{TTL: 6 * time.Second, RenewInterval: time.Second, SafetyMargin: 3500 * time.Millisecond},
			NewElection: func(t *testing.T, timing election.Timing) func(*testing.T, string) electiontest.Candidate {
				e := electionName(t)
				return func(t *testing.T, name string) electiontest.Candidate {
					b, d := cluster(t, redis.Config{Election: e, Timing: timing})
					return electiontest.Candidate{Backend: b, Cut: d.Cut, Heal: d.Heal, Ledger: b.Ledger(),
						Depose: func(t *testing.T, l election.Lease) {
							ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
							defer cancel()
							if err := adm.Del(ctx, b.LeaseKey()).Err(); err != nil {
								t.Fatalf("depose: DEL %s: %v", b.LeaseKey(), err)
							}
						}}
				}
			},
		})
	})
}
