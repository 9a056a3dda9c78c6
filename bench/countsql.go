package main

import (
	"bytes"
	"encoding/binary"
	"strings"
)

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
