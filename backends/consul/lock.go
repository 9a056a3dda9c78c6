package consul

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/election"
)

// value is the JSON stored in the lock key, so that the Consul UI and
// `consul kv get` show who leads. Token is filled in right after the lock
// is taken (it is the ModifyIndex of the lock operation, unknown before).
type value struct {
	election.Identity
	Session  string    `json:"session"`
	Token    uint64    `json:"token,omitempty"`
	Acquired time.Time `json:"acquired,omitzero"`
}

// refusal says why Consul refused a lock attempt.
type refusal int

const (
	notRefused refusal = iota
	// refusedLockDelay: the last holder's session was invalidated (not
	// released) less than its lock-delay ago.
	refusedLockDelay
	// refusedOther: another session holds the key, or ours is invalid.
	refusedOther
)

// lock tries once to lock the key with s. It returns a lease if it did,
// the reason if Consul refused, or an error if the outcome is unknown.
func (b *Backend) lock(ctx context.Context, s *session, id election.Identity) (election.Lease, refusal, error) {
	v := value{Identity: id, Session: s.id, Acquired: time.Now().UTC().Round(time.Millisecond)}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, notRefused, err
	}
	rctx, cancel := context.WithTimeout(ctx, b.requestTimeout())
	defer cancel()
	ok, resp, _, err := b.cfg.Client.Txn().Txn(api.TxnOps{{KV: &api.KVTxnOp{
		Verb:    api.KVLock,
		Key:     b.cfg.Key,
		Value:   raw,
		Flags:   api.LockFlagValue,
		Session: s.id,
	}}}, (&api.QueryOptions{}).WithContext(rctx))
	if err != nil {
		return nil, notRefused, fmt.Errorf("lock %s: %w", b.cfg.Key, err)
	}
	if !ok {
		why := txnErrors(resp)
		b.log.Debug("consul lock refused", "identity", id.ID, "errors", why)
		// Consul's words: failed to lock key "..." due to lock delay.
		if strings.Contains(why, "lock delay") {
			return nil, refusedLockDelay, nil
		}
		return nil, refusedOther, nil
	}
	if len(resp.Results) != 1 || resp.Results[0].KV == nil || resp.Results[0].KV.Session != s.id {
		return nil, notRefused, fmt.Errorf("lock %s: unexpected transaction result %+v", b.cfg.Key, resp)
	}
	// The token is the raft index of our lock operation. Consul's raft
	// index grows cluster-wide with every write, so it is greater than the
	// index of every earlier lock of this key, even if the key was deleted
	// and created again in between (LockIndex would restart then).
	token := resp.Results[0].KV.ModifyIndex
	v.Token = token
	t := &term{session: s.id, token: token, value: v}
	t.lease = b.newLease(t, s.sent, id)
	t.lease.SetToken(token)

	// Show the token in the key's value, for people reading the Consul UI.
	// The CAS on our lock's index succeeds only if nothing touched the key
	// since; a plain write keeps the lock. Best effort: the term does not
	// depend on it, and Leader falls back to the ModifyIndex.
	if raw, err := json.Marshal(v); err == nil {
		if _, _, err := b.cfg.Client.KV().CAS(&api.KVPair{Key: b.cfg.Key, Value: raw, Flags: api.LockFlagValue, ModifyIndex: token},
			(&api.WriteOptions{}).WithContext(rctx)); err != nil {
			b.log.Debug("consul write token into lock key", "err", err)
		}
	}
	b.log.Debug("consul lock taken", "identity", id.ID, "session", s.id, "token", token)
	s.id = "" // the lease owns the session now
	return t.lease, notRefused, nil
}

// txnErrors joins the reasons Consul gave for refusing a transaction.
func txnErrors(r *api.TxnResponse) string {
	if r == nil {
		return ""
	}
	var s []string
	for _, e := range r.Errors {
		s = append(s, e.What)
	}
	return strings.Join(s, "; ")
}
