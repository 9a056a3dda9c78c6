package main

import (
	"bytes"
	"strconv"
	"strings"
)

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
