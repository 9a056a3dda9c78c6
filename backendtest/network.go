package backendtest

import (
	"testing"
	"time"

	"github.com/batonhq/baton/internal/proxytest"
)

// Network is the path between one candidate and its server, which the
// suites break and mend. A *Proxy is one; a backend whose client cannot
// go through a TCP proxy supplies its own.
type Network interface {
	// Blackhole stops every byte both ways, on open connections and new
	// ones, until Heal: a cut that no error reports.
	Blackhole()
	// HoldReplies lets requests reach the server and holds its replies
	// until Heal: the server applies a write whose answer is lost.
	HoldReplies()
	// Heal lets traffic flow again and delivers what was held.
	Heal()
}

// Proxy is a TCP proxy on loopback that a test puts between a client and
// its server, to cut the network of that client alone. It closes when
// the test that made it ends.
type Proxy struct{ p *proxytest.Proxy }

// NewProxy starts a proxy to target (host:port). Point the client at
// Addr.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := proxytest.New(target)
	if err != nil {
		t.Fatalf("backendtest.NewProxy(%q): %v", target, err)
	}
	t.Cleanup(func() { p.Close() })
	return &Proxy{p: p}
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.p.Addr() }

// Blackhole stops every byte both ways until Heal.
func (p *Proxy) Blackhole() { p.p.Blackhole() }

// HoldReplies passes requests and holds the replies until Heal.
func (p *Proxy) HoldReplies() { p.p.HoldReplies() }

// Heal lets traffic flow again.
func (p *Proxy) Heal() { p.p.Heal() }

// SetDelay delays every chunk of traffic by d (zero: none).
func (p *Proxy) SetDelay(d time.Duration) { p.p.SetDelay(d) }
