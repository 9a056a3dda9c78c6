package consul

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"
)

// Check implements driver.Checker: it verifies that the agent answers and
// that the client's ACL token may do what the election and its ledger do,
// so that a missing, unknown or too weak token fails at start with
// Consul's own reason instead of making Acquire retry forever. It blocks
// until answered or ctx is done, and leaves nothing behind. It sends:
//
//   - a read of Key (key:read);
//   - a transaction of a check-index on Key and delete-cas operations on
//     Key and on a key under Key+"-ledger/", all against an index that
//     never matches, so it fails and changes nothing. Consul checks the
//     ACL of every operation before running any, so a token without
//     key:write on either is refused with "Permission denied";
//   - a session create and destroy, as Acquire does (session:write on the
//     agent's node).
//
// Errors name the key, the step and Consul's message, e.g. "Unexpected
// response code: 403 (ACL not found)" for an unknown token, followed by
// what the token needs.
func (b *Backend) Check(ctx context.Context) error {
	key := b.cfg.Key
	fail := func(step string, err error) error {
		return fmt.Errorf("consul: check key %s: %s: %w", key, step, b.explain(err))
	}
	if _, _, err := b.cfg.Client.KV().Get(key, (&api.QueryOptions{}).WithContext(ctx)); err != nil {
		return fail("read", err)
	}
	// Consul decodes transaction bodies through float64: an index must be
	// exact in a float64 to arrive as sent. No raft index gets near 2^53.
	const never = 1<<53 - 1
	probe := key + "-ledger/baton-check"
	ok, resp, _, err := b.cfg.Client.Txn().Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: never}}, // never true
		{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: key, Index: never}},
		{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: probe, Index: never}},
	}, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fail("write probe", err)
	}
	if ok {
		return fail("write probe", errors.New("check-index against an impossible index succeeded"))
	}
	var denied []string
	for _, e := range resp.Errors {
		// Consul runs every operation and reports each failure; the
		// expected ones (index checks) are not about permissions.
		if isACLError(e.What) {
			denied = append(denied, e.What)
		}
	}
	if len(denied) > 0 {
		return fail("write probe", errors.New(strings.Join(denied, "; ")))
	}
	sid, _, err := b.cfg.Client.Session().CreateNoChecks(&api.SessionEntry{
		Name:     "baton check " + key,
		TTL:      MinTTL.String(),
		Behavior: api.SessionBehaviorDelete,
	}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return fail("create session", err)
	}
	if _, err := b.cfg.Client.Session().Destroy(sid, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fail("destroy session "+sid, err)
	}
	return nil
}

// explain adds to an ACL error what the token needs.
func (b *Backend) explain(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "ACL not found"):
		return fmt.Errorf("%w: Consul does not know the ACL token (wrong, expired or deleted)", err)
	case isACLError(msg):
		return fmt.Errorf("%w: the token needs key_prefix %q write (it covers %s-ledger/) and session write on the agent's node", err, b.cfg.Key, b.cfg.Key)
	case strings.Contains(msg, "https://") && (strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "client conn could not be established")):
		// With TLS 1.3 the server checks the client certificate after the
		// client has finished its handshake; its alert can be lost when
		// the client writes first (broken pipe, reset), or the HTTP/2
		// connection fails before the client reads it.
		return fmt.Errorf("%w: tls: the server closed the connection right after the TLS handshake, "+
			"as it does when it rejects the client certificate (none, or not signed by a CA it trusts)", err)
	}
	return err
}

func isACLError(msg string) bool {
	return strings.Contains(msg, "Permission denied") || strings.Contains(msg, "ACL not found")
}
