package redis_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/internal/proxytest"
	"github.com/batonhq/baton/internal/redistest"
)

// cutDialer is a candidate's own network path to a Cluster: a Cluster
// client learns the nodes' addresses from the servers, so one proxy in
// front of a seed node would not carry its traffic. The dialer (through
// Config.Dialer) sends each connection through a fault proxy of this
// candidate for that node, made on first use; Cut blackholes them all.
type cutDialer struct {
	mu      sync.Mutex
	cut     bool
	proxies map[string]*proxytest.Proxy
}

func newCutDialer(t *testing.T) *cutDialer {
	d := &cutDialer{proxies: map[string]*proxytest.Proxy{}}
	t.Cleanup(d.close) // after the Backend's Close, registered later
	return d
}

func (d *cutDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	p := d.proxies[addr]
	if p == nil {
		var err error
		if p, err = proxytest.New(addr); err != nil {
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

func (d *cutDialer) each(f func(*proxytest.Proxy), cut bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = cut
	for _, p := range d.proxies {
		f(p)
	}
}

func (d *cutDialer) Cut()  { d.each((*proxytest.Proxy).Blackhole, true) }
func (d *cutDialer) Heal() { d.each((*proxytest.Proxy).Heal, false) }
func (d *cutDialer) close() {
	d.each(func(p *proxytest.Proxy) { p.Close() }, false)
}

// clusterBackend returns a Backend of Cluster c, closed when t ends, and
// the cutDialer that carries its traffic.
func clusterBackend(t *testing.T, c *redistest.Cluster, cfg redis.Config) (*redis.Backend, *cutDialer) {
	d := newCutDialer(t)
	cfg.ClusterAddrs, cfg.Dialer = c.Addrs(), d.dial
	return newBackend(t, cfg), d
}

// Check and the fail-closed WAIT against a Redis Cluster of three
// primaries; TestBackend_Cluster runs the conformance suite on one.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	t.Run("Check", func(t *testing.T) {
		b, _ := clusterBackend(t, c, redis.Config{Election: electionName(t)})
		if err := b.Check(ctxT(t, 5*time.Second)); err != nil {
			t.Fatalf("Check: %v", err)
		}
	})
	t.Run("WaitWithoutReplicas", func(t *testing.T) {
		// No replica: every write fails closed, on the slot's primary.
		b, _ := clusterBackend(t, c, redis.Config{Election: electionName(t), WaitReplicas: 1})
		if err := b.Check(ctxT(t, 5*time.Second)); !errors.Is(err, redis.ErrNotReplicated) {
			t.Errorf("Check: %v, want ErrNotReplicated", err)
		}
		if l, err := b.Acquire(ctxT(t, 2*time.Second), backendtest.TestIdentity("a")); err == nil {
			l.Release(context.Background()) //nolint:errcheck // the test failed already
			t.Errorf("Acquire without a replica to acknowledge: a lease, want none")
		}
	})
}
