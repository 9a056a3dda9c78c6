// Package proxytest is an in-process TCP proxy for tests: put it between a
// client and its server, then blackhole, delay or reset the traffic to
// inject network faults on loopback. It is internal because it is a test
// tool, not part of baton's API; the backend tests, e2e and bench use it.
package proxytest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections from its listen address to a target.
// Its methods are safe for concurrent use. Close stops it and waits for
// every goroutine it started.
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	blackhole bool
	healed    chan struct{} // closed when the blackhole is lifted
	hold      bool          // replies (target to client) are held
	released  chan struct{} // closed when the replies are let go
	delay     time.Duration
	conns     map[*pair]struct{}
	closed    bool

	accepted atomic.Int64
	bytes    atomic.Int64
	wg       sync.WaitGroup
}

type pair struct {
	client net.Conn

	mu      sync.Mutex
	server  net.Conn // nil until dialed
	aborted bool
}

// New listens on a free loopback port and forwards to target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*pair]struct{}{}, healed: make(chan struct{}), released: make(chan struct{})}
	close(p.healed)
	close(p.released)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's listen address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address traffic is forwarded to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// Retarget forwards new connections to target from now on and resets the
// open ones, as a load balancer that moves a client to another server:
// the client reconnects, and reaches target.
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
	p.Reset()
}

// Blackhole stops forwarding in both directions: bytes sent either way are
// held (not lost) until Heal, new connections are accepted but not dialed
// through. Connections stay open, like a silent network partition.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.blackhole {
		p.blackhole = true
		p.healed = make(chan struct{})
	}
}

// HoldReplies stops forwarding from the target to the clients: requests
// still reach the target, which acts on them, and its replies are held
// (not lost) until Heal. A client then sees a write time out that the
// server applied.
func (p *Proxy) HoldReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.hold {
		p.hold = true
		p.released = make(chan struct{})
	}
}

// Heal lifts a Blackhole or HoldReplies and sets the delay back to zero.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = 0
	if p.blackhole {
		p.blackhole = false
		close(p.healed)
	}
	p.release()
}

func (p *Proxy) release() {
	if p.hold {
		p.hold = false
		close(p.released)
	}
}

// SetDelay adds d of latency to every chunk forwarded, in each direction.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Reset closes every open connection abruptly (RST where the OS allows);
// new connections are accepted as usual.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*pair]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.abort()
	}
}

// Connections is how many client connections the proxy has accepted.
func (p *Proxy) Connections() int64 { return p.accepted.Load() }

// Bytes is how many bytes the proxy has forwarded, both ways.
func (p *Proxy) Bytes() int64 { return p.bytes.Load() }

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines to return.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.blackhole {
		p.blackhole = false
		close(p.healed)
	}
	p.release()
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func (c *pair) abort() {
	c.mu.Lock()
	c.aborted = true
	server := c.server
	c.mu.Unlock()
	for _, conn := range []net.Conn{c.client, server} {
		if conn == nil {
			continue
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// gate blocks while the proxy is blackholed (or, for a reply, while
// replies are held) and returns the delay to apply.
func (p *Proxy) gate(reply bool) (time.Duration, bool) {
	for {
		p.mu.Lock()
		bh, healed, d, closed := p.blackhole, p.healed, p.delay, p.closed
		hold, released := p.hold && reply, p.released
		p.mu.Unlock()
		switch {
		case closed:
			return 0, false
		case bh:
			<-healed
		case hold:
			<-released
		default:
			return d, true
		}
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		pr := &pair{client: c}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(pr) })
	}
}

func (p *Proxy) serve(pr *pair) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, pr)
		p.mu.Unlock()
		pr.abort()
	}()
	if _, ok := p.gate(false); !ok {
		return
	}
	s, err := net.DialTimeout("tcp", p.Target(), 5*time.Second)
	if err != nil {
		return
	}
	pr.mu.Lock()
	pr.server = s
	aborted := pr.aborted
	pr.mu.Unlock()
	if aborted { // reset while dialing
		s.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if !p.pipe(s, pr.client, false) {
			pr.abort()
		}
	})
	wg.Go(func() {
		if !p.pipe(pr.client, s, true) {
			pr.abort()
		}
	})
	wg.Wait()
}

// pipe copies src to dst chunk by chunk, holding each chunk while the proxy
// is blackholed and delaying it as set. It reports whether src ended with
// a clean EOF (then dst's write side is closed). reply says src is the
// target.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			d, ok := p.gate(reply)
			if !ok {
				return false
			}
			if d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
			p.bytes.Add(int64(n))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return false
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return true
		}
	}
}
