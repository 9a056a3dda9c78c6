package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http2/hpack"

	"github.com/batonhq/baton/internal/faultproxy"
)

// countProxy wraps a faultproxy.Proxy: clients connect to countProxy, which
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
type countProxy struct {
	fp    *faultproxy.Proxy
	ln    net.Listener
	proto string
	wg    sync.WaitGroup

	mu     sync.Mutex
	counts map[string]int64
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
	fp, err := faultproxy.New(target)
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
		io.Copy(c, s)
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

// classifySQL sorts a statement by what it does to the lease table.
func classifySQL(q string) string {
	s := strings.ToUpper(strings.TrimSpace(q))
	switch {
	case s == "" || s == ";" || s == "SELECT 1" || strings.HasPrefix(s, "LISTEN") || strings.HasPrefix(s, "SET "):
		return kOther
	case strings.HasPrefix(s, "UPDATE") && strings.Contains(s, "RENEWED_AT"):
		return kRenew
	case strings.Contains(s, "INSERT") || strings.Contains(s, "UPDATE") || strings.Contains(s, "DELETE"):
		return kWrite
	case strings.HasPrefix(s, "SELECT") || strings.HasPrefix(s, "WITH") || strings.HasPrefix(s, "SHOW"):
		return kRead
	default:
		return kOther
	}
}

// h2Parser counts gRPC request messages per method in a client-to-server
// HTTP/2 byte stream.
type h2Parser struct {
	p        *countProxy
	buf      []byte
	preface  bool
	dec      *hpack.Decoder
	streams  map[uint32]*h2Stream
	hdrBlock []byte
	hdrID    uint32
}

type h2Stream struct {
	kind string
	hdr  []byte // partial 5-byte gRPC message prefix
	need int    // bytes left of the current message body
}

const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

func (h *h2Parser) feed(b []byte) {
	h.buf = append(h.buf, b...)
	if !h.preface {
		if len(h.buf) < len(h2Preface) {
			return
		}
		h.buf = h.buf[len(h2Preface):]
		h.preface = true
	}
	for len(h.buf) >= 9 {
		n := int(h.buf[0])<<16 | int(h.buf[1])<<8 | int(h.buf[2])
		if len(h.buf) < 9+n {
			return
		}
		typ, flags := h.buf[3], h.buf[4]
		id := binary.BigEndian.Uint32(h.buf[5:9]) & 0x7fffffff
		pl := h.buf[9 : 9+n]
		switch typ {
		case 0x0: // DATA
			pl = unpadded(flags, pl)
			if st := h.streams[id]; st != nil {
				h.data(st, pl)
			}
			if flags&0x1 != 0 {
				delete(h.streams, id)
			}
		case 0x1: // HEADERS
			pl = unpadded(flags, pl)
			if flags&0x20 != 0 && len(pl) >= 5 {
				pl = pl[5:]
			}
			h.hdrBlock = append(h.hdrBlock[:0], pl...)
			h.hdrID = id
			if flags&0x4 != 0 {
				h.headers(flags&0x1 != 0)
			}
		case 0x9: // CONTINUATION
			h.hdrBlock = append(h.hdrBlock, pl...)
			if flags&0x4 != 0 {
				h.headers(false)
			}
		case 0x3: // RST_STREAM
			delete(h.streams, id)
		}
		h.buf = h.buf[9+n:]
	}
	if len(h.buf) == 0 {
		h.buf = nil
	}
}

func (h *h2Parser) headers(endStream bool) {
	fields, err := h.dec.DecodeFull(h.hdrBlock)
	if err != nil {
		return
	}
	for _, f := range fields {
		if f.Name == ":path" {
			if _, ok := h.streams[h.hdrID]; !ok && !endStream {
				h.streams[h.hdrID] = &h2Stream{kind: classifyGRPC(f.Value)}
			}
		}
	}
}

func (h *h2Parser) data(st *h2Stream, b []byte) {
	for len(b) > 0 {
		if st.need > 0 {
			k := min(st.need, len(b))
			st.need -= k
			b = b[k:]
			continue
		}
		k := min(5-len(st.hdr), len(b))
		st.hdr = append(st.hdr, b[:k]...)
		b = b[k:]
		if len(st.hdr) == 5 {
			st.need = int(binary.BigEndian.Uint32(st.hdr[1:5]))
			st.hdr = st.hdr[:0]
			h.p.count(st.kind)
		}
	}
}

func classifyGRPC(path string) string {
	switch path {
	case "/etcdserverpb.KV/Range":
		return kRead
	case "/etcdserverpb.Watch/Watch":
		return kBlocking
	case "/etcdserverpb.Lease/LeaseKeepAlive":
		return kRenew
	case "/etcdserverpb.KV/Put", "/etcdserverpb.KV/Txn", "/etcdserverpb.KV/DeleteRange",
		"/etcdserverpb.Lease/LeaseGrant", "/etcdserverpb.Lease/LeaseRevoke":
		return kWrite
	default:
		return kOther
	}
}

// pgParser counts statements in a PostgreSQL client-to-server stream.
type pgParser struct {
	p       *countProxy
	buf     []byte
	started bool
	stmts   map[string]string // prepared statement name -> text
	cur     string            // text of the statement bound last
}

func (g *pgParser) feed(b []byte) {
	g.buf = append(g.buf, b...)
	for {
		if !g.started {
			if len(g.buf) < 8 {
				return
			}
			n := int(binary.BigEndian.Uint32(g.buf[0:4]))
			if len(g.buf) < n {
				return
			}
			code := binary.BigEndian.Uint32(g.buf[4:8])
			if code != 80877103 && code != 80877104 { // not SSLRequest/GSSENCRequest
				g.started = true
			}
			g.buf = g.buf[n:]
			continue
		}
		if len(g.buf) < 5 {
			return
		}
		n := int(binary.BigEndian.Uint32(g.buf[1:5]))
		if len(g.buf) < 1+n {
			return
		}
		typ, body := g.buf[0], g.buf[5:1+n]
		switch typ {
		case 'Q':
			g.p.count(classifySQL(cstr(body)))
		case 'P':
			name := cstr(body)
			g.stmts[name] = cstr(body[len(name)+1:])
		case 'B':
			portal := cstr(body)
			g.cur = g.stmts[cstr(body[len(portal)+1:])]
		case 'E':
			g.p.count(classifySQL(g.cur))
		}
		g.buf = g.buf[1+n:]
	}
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// myParser counts commands in a MySQL client-to-server stream.
type myParser struct {
	p        *countProxy
	buf      []byte
	prepared string
}

func (m *myParser) feed(b []byte) {
	m.buf = append(m.buf, b...)
	for len(m.buf) >= 4 {
		n := int(m.buf[0]) | int(m.buf[1])<<8 | int(m.buf[2])<<16
		if len(m.buf) < 4+n {
			return
		}
		seq, body := m.buf[3], m.buf[4:4+n]
		if seq == 0 && len(body) > 0 {
			switch body[0] {
			case 0x03: // COM_QUERY
				m.p.count(classifySQL(string(body[1:])))
			case 0x16: // COM_STMT_PREPARE
				m.prepared = string(body[1:])
			case 0x17: // COM_STMT_EXECUTE
				m.p.count(classifySQL(m.prepared))
			case 0x0e: // COM_PING
				m.p.count(kOther)
			}
		}
		m.buf = m.buf[4+n:]
	}
}

// unpadded returns the payload of a DATA or HEADERS frame without its
// padding when the frame's PADDED flag (0x8) is set, else pl as it is.
func unpadded(flags byte, pl []byte) []byte {
	if flags&0x8 == 0 || len(pl) == 0 {
		return pl
	}
	pad := int(pl[0])
	pl = pl[1:]
	if pad <= len(pl) {
		pl = pl[:len(pl)-pad]
	}
	return pl
}

// respParser counts commands in a Redis client-to-server stream (RESP:
// each command an array of bulk strings; an inline command is one line).
// It keeps the first respKeep arguments of each command, a prefix of
// each, and skips the rest of the bytes as they pass.
type respParser struct {
	p    *countProxy
	buf  []byte
	left int      // arguments of the current command still to come (0: none open)
	n    int      // the current command's argument count
	args []string // its first arguments (prefixes)
	body int      // bytes of the current bulk string (with its CRLF) still to come
	keep int      // of those, how many still to keep
	cur  []byte
}

const (
	respKeep    = 5   // EVALSHA sha numkeys key1 key2
	respKeepLen = 256 // bytes kept of each argument
)

func (r *respParser) feed(b []byte) {
	r.buf = append(r.buf, b...)
	for len(r.buf) > 0 {
		if r.body > 0 {
			k := min(r.body, len(r.buf))
			t := min(k, r.keep)
			r.cur = append(r.cur, r.buf[:t]...)
			r.keep -= t
			r.body -= k
			r.buf = r.buf[k:]
			if r.body == 0 {
				r.arg(string(r.cur))
			}
			continue
		}
		i := bytes.Index(r.buf, []byte("\r\n"))
		if i < 0 {
			break
		}
		line := r.buf[:i]
		r.buf = r.buf[i+2:]
		switch {
		case r.left == 0 && len(line) > 0 && line[0] == '*':
			n, err := strconv.Atoi(string(line[1:]))
			if err != nil || n <= 0 {
				continue
			}
			r.left, r.n, r.args = n, n, r.args[:0]
		case r.left == 0:
			if f := strings.Fields(string(line)); len(f) > 0 { // an inline command
				r.p.count(classifyRedis(f, len(f)))
			}
		case len(line) > 0 && line[0] == '$':
			n, err := strconv.Atoi(string(line[1:]))
			if err != nil || n < 0 {
				r.arg("")
				continue
			}
			r.body, r.cur = n+2, r.cur[:0]
			if len(r.args) < respKeep {
				r.keep = min(n, respKeepLen)
			} else {
				r.keep = 0
			}
		default: // not RESP as a client sends it: start over at the next array
			r.left = 0
		}
	}
	if len(r.buf) == 0 {
		r.buf = nil
	}
}

// arg records one argument of the open command, and counts the command
// when it was the last.
func (r *respParser) arg(a string) {
	if len(r.args) < respKeep {
		r.args = append(r.args, a)
	}
	if r.left--; r.left == 0 {
		r.p.count(classifyRedis(r.args, r.n))
	}
}

// classifyRedis sorts a Redis command by its name and, for a script call
// of the baton backend (EVALSHA or EVAL: script, numkeys, keys, args),
// by its keys and argument count, which tell its scripts apart without
// their sources: the acquire script has keys ...:lease and ...:token;
// renew has ...:lease alone and 2 arguments, release ...:lease alone and
// 3; a Ledger claim has ...:lease, ...:last and the runs lists; a Ledger
// finish only runs lists (...:runs:JOB); Check's probe ...:check. args
// holds the command's first arguments; n is its argument count.
func classifyRedis(args []string, n int) string {
	switch strings.ToUpper(args[0]) {
	case "EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO":
		if len(args) < 4 {
			return kOther
		}
		nk, err := strconv.Atoi(args[2])
		if err != nil || nk < 1 {
			return kOther
		}
		nargv := n - 3 - nk
		k1 := args[3]
		switch {
		case strings.HasSuffix(k1, ":lease") && nk == 1 && nargv == 2:
			return kRenew
		case strings.HasSuffix(k1, ":lease"): // acquire, release, claim
			return kWrite
		case strings.Contains(k1, ":runs:"): // finish
			return kWrite
		default: // Check's probe
			return kOther
		}
	case "GET", "MGET", "HGET", "HMGET", "HGETALL", "LRANGE", "LINDEX", "LLEN", "PTTL", "TTL", "EXISTS", "SCAN", "HSCAN":
		return kRead
	case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "BLPOP", "BRPOP", "BLMOVE", "BZPOPMIN", "BZPOPMAX", "XREAD", "WAIT":
		return kBlocking
	case "SET", "DEL", "UNLINK", "INCR", "PEXPIRE", "EXPIRE", "HSET", "HDEL", "LPUSH", "RPUSH", "LSET", "LTRIM", "PUBLISH":
		return kWrite
	default: // HELLO, CLIENT, PING, AUTH, SELECT, SCRIPT, UNSUBSCRIBE, ...
		return kOther
	}
}
