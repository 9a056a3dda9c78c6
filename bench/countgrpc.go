package main

import (
	"encoding/binary"

	"golang.org/x/net/http2/hpack"
)

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
