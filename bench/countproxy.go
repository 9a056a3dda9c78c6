package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/net/http2/hpack"

	"github.com/batonhq/baton/internal/proxytest"
)

// countProxy wraps a proxytest.Proxy: clients connect to countProxy, which
// forwards every connection through the fault proxy to the server and
// parses what the client sends, to count requests (not bytes) by kind.
// Blackhole and Close act on the fault proxy behind it.
//
// Protocols:
//   - "h2" (etcd gRPC): HTTP/2 frames; each HEADERS block is HPACK-decoded
//     for the method (:path), and every gRPC message in the client's DATA
//     frames is one request of that method (a unary call is one, each
//     keepalive or watch request on a stream is one).
//   - "http" (Consul): each HTTP/1.1 request is one.
//   - "pg": each simple Query ('Q') and each extended-protocol Execute
//     ('E') is one, classified by the statement text (Parse).
//   - "mysql": each COM_QUERY, COM_STMT_EXECUTE and COM_PING is one,
//     classified by the text (COM_STMT_PREPARE before the execute).
//   - "redis": each RESP command (an array of bulk strings) is one,
//     classified by its name, and a script call (EVALSHA, EVAL) by its
//     keys: see classifyRedis.
//   - "" (TLS, as to a kube-apiserver): nothing is counted; the bytes pass.
type countProxy struct {
	fp    *proxytest.Proxy
	ln    net.Listener
	proto string
	wg    sync.WaitGroup

	mu     sync.Mutex
	counts map[string]int64
	down   int64 // bytes the server sent to the clients
	conns  map[net.Conn]struct{}
	closed bool
}

// Request kinds.
const (
	kRead     = "read"     // a one-off read (etcd Range, SQL SELECT, Consul non-blocking GET)
	kBlocking = "blocking" // a long-poll or watch request (Consul blocking GET, etcd Watch message)
	kWrite    = "write"    // a write other than a renewal
	kRenew    = "renew"    // a lease/session renewal (etcd LeaseKeepAlive, Consul session renew, SQL renew UPDATE, Redis renew script)
	kOther    = "other"    // pings, session bookkeeping, LISTEN, Redis HELLO
)

var kinds = []string{kRead, kBlocking, kWrite, kRenew, kOther}

func newCountProxy(target, proto string) (*countProxy, error) {
	fp, err := proxytest.New(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fp.Close()
		return nil, err
	}
	p := &countProxy{fp: fp, ln: ln, proto: proto, counts: map[string]int64{}, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *countProxy) Addr() string { return p.ln.Addr().String() }
func (p *countProxy) Blackhole()   { p.fp.Blackhole() }

// Counting reports whether the proxy reads its protocol and counts the
// requests; with no protocol ("") it only passes the bytes on.
func (p *countProxy) Counting() bool { return p.proto != "" }

// Close closes the fault proxy first (bytes it holds are dropped, not
// delivered), then the counting side.
func (p *countProxy) Close() {
	p.fp.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// Counts returns a copy of the counts so far.
func (p *countProxy) Counts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int64, len(p.counts))
	for k, v := range p.counts {
		m[k] = v
	}
	return m
}

// BytesDown returns how many bytes the server sent to the clients so
// far, protocol framing included: what the clients read off the wire.
func (p *countProxy) BytesDown() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

// downCounter counts the bytes written to a client.
type downCounter struct {
	c net.Conn
	p *countProxy
}

func (d downCounter) Write(b []byte) (int, error) {
	n, err := d.c.Write(b)
	d.p.mu.Lock()
	d.p.down += int64(n)
	d.p.mu.Unlock()
	return n, err
}

func (p *countProxy) count(kind string) {
	p.mu.Lock()
	p.counts[kind]++
	p.mu.Unlock()
}

func (p *countProxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		if p.closed {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *countProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *countProxy) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.fp.Addr())
	if err != nil {
		return
	}
	defer s.Close()
	if !p.track(c, true) {
		return
	}
	defer p.track(c, false)
	p.track(s, true)
	defer p.track(s, false)

	var feed func([]byte)
	var stop func()
	switch p.proto {
	case "h2":
		feed = (&h2Parser{p: p, streams: map[uint32]*h2Stream{}, dec: hpack.NewDecoder(4096, nil)}).feed
	case "pg":
		feed = (&pgParser{p: p, stmts: map[string]string{}}).feed
	case "mysql":
		feed = (&myParser{p: p}).feed
	case "redis":
		feed = (&respParser{p: p}).feed
	case "http":
		pr, pw := io.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			br := bufio.NewReader(pr)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					break
				}
				p.count(classifyHTTP(req))
				io.Copy(io.Discard, req.Body)
				req.Body.Close()
			}
			io.Copy(io.Discard, pr)
		}()
		feed = func(b []byte) { pw.Write(b) }
		stop = func() { pw.Close(); <-done }
	default:
		feed = func([]byte) {}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(downCounter{c, p}, s)
		c.Close()
	})
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := s.Write(buf[:n]); werr != nil {
				break
			}
			feed(buf[:n])
		}
		if err != nil {
			break
		}
	}
	s.Close()
	wg.Wait()
	if stop != nil {
		stop()
	}
}

func classifyHTTP(r *http.Request) string {
	path := r.URL.Path
	switch {
	case r.Method == "GET" && strings.HasPrefix(path, "/v1/kv/"):
		if r.URL.Query().Get("index") != "" {
			return kBlocking
		}
		return kRead
	case strings.HasPrefix(path, "/v1/session/renew/"):
		return kRenew
	case r.Method == "PUT" && (strings.HasPrefix(path, "/v1/kv/") || path == "/v1/txn"):
		return kWrite
	case r.Method == "GET":
		return kRead
	default:
		return kOther // session create/destroy, ...
	}
}
