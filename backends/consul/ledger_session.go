package consul

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"
)

// sessionLookup is the session of one term, once read.
type sessionLookup struct {
	done chan struct{} // closed when sid and err are set
	sid  string        // "": the term no longer holds
	err  error
}

// session returns the session holding the lock for the term with token,
// or "" if that term no longer holds. A live term's session is cached (a
// session holds the lock for one term: Acquire creates one per term) until
// a check-session on it fails; concurrent callers share one read.
func (l *tickLedger) session(ctx context.Context, token uint64) (string, error) {
	l.mu.Lock()
	s, ok := l.sessions[token]
	if !ok {
		s = &sessionLookup{done: make(chan struct{})}
		if len(l.sessions) >= maxSessions {
			l.evictSessionLocked()
		}
		l.sessions[token] = s
		l.mu.Unlock()
		s.sid, s.err = l.readSession(ctx, token)
		if s.err != nil || s.sid == "" {
			l.dropSession(token, s)
		}
		close(s.done)
	} else {
		l.mu.Unlock()
	}
	select {
	case <-s.done:
		return s.sid, s.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// evictSessionLocked forgets the oldest term whose session was read.
func (l *tickLedger) evictSessionLocked() {
	var oldest uint64
	found := false
	for tok, s := range l.sessions {
		select {
		case <-s.done:
			if !found || tok < oldest {
				oldest, found = tok, true
			}
		default:
		}
	}
	if found {
		delete(l.sessions, oldest)
	}
}

// dropSession forgets the session of token if it is still s (any if s is
// nil).
func (l *tickLedger) dropSession(token uint64, s *sessionLookup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.sessions[token]; ok && (s == nil || cur == s) {
		delete(l.sessions, token)
	}
}

// readSession reads the lock key: the session named in its value, if that
// value or the key's ModifyIndex names token, or "".
func (l *tickLedger) readSession(ctx context.Context, token uint64) (string, error) {
	b := l.b
	pair, _, err := b.cfg.Client.KV().Get(b.cfg.Key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return "", err
	}
	var v value
	if pair == nil || pair.Session == "" || json.Unmarshal(pair.Value, &v) != nil || v.Session != pair.Session ||
		(v.Token != token && pair.ModifyIndex != token) {
		return "", nil
	}
	return pair.Session, nil
}

// checkSession reports whether the session sid no longer holds the lock
// key, in a read-only transaction.
func (l *tickLedger) checkSession(ctx context.Context, sid string) (stale bool, err error) {
	ok, resp, err := l.txn(ctx, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: l.b.cfg.Key, Session: sid}}})
	switch {
	case err != nil:
		return false, err
	case ok:
		return false, nil
	case strings.Contains(txnErrors(resp), "Permission denied"):
		return false, fmt.Errorf("check session: %s", txnErrors(resp))
	}
	return true, nil
}
