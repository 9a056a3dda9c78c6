package consul

import (
	"context"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// Control returns the election's control store (pauses, run-now
// requests, the instance registry; see package control), kept in Consul
// in the ledger's subtree, where the ledger's ACL rule covers it:
//
//	<Key>-ledger/%control/<key>    the entry's value
//
// No job's keys are there: the ledger path-escapes job names, and a '%'
// of a name is escaped as "%25".
// An entry's version is its ModifyIndex: Raft indexes only grow, so a
// key deleted and made again never gets a version back. List is one
// recursive read. Put and Delete are one transaction each: a CAS or a
// set (a delete, after a check of the index when one is given) and, for a Put with a token, a check that the
// term's session still holds Key, as a ledger claim checks it; the
// transaction's errors say which operation failed. A Put with a token
// finds the term's session once per token (the ledger's cache, one read
// of Key).
func (b *Backend) Control() control.Store {
	return &controlStore{b: b, root: b.cfg.Key + "-ledger/%control/"}
}

type controlStore struct {
	b    *Backend
	root string
}

func (s *controlStore) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	if err := control.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	pairs, _, err := s.b.cfg.Client.KV().List(s.root+prefix, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("consul: control: list %q: %w", prefix, err)
	}
	out := make([]control.Entry, 0, len(pairs))
	for _, p := range pairs {
		v := p.Value
		if v == nil {
			v = []byte{}
		}
		out = append(out, control.Entry{Key: p.Key[len(s.root):], Value: v, Version: int64(p.ModifyIndex)})
	}
	return out, nil
}

func (s *controlStore) Put(ctx context.Context, p control.Put) (int64, error) {
	if err := control.CheckPut(p); err != nil {
		return 0, err
	}
	var ops api.TxnOps
	if p.Token != 0 {
		sid, err := s.b.ledger.session(ctx, p.Token)
		if err != nil {
			return 0, fmt.Errorf("consul: control: put %s: find the session of term %d: %w", p.Key, p.Token, err)
		}
		if sid == "" {
			return 0, fmt.Errorf("consul: control: put %s with token %d: no session holds %s with that token: %w", p.Key, p.Token, s.b.cfg.Key, ledger.ErrStaleTerm)
		}
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: s.b.cfg.Key, Session: sid}})
	}
	op := &api.KVTxnOp{Verb: api.KVSet, Key: s.root + p.Key, Value: p.Value}
	if p.IfVersion != control.AnyVersion {
		op.Verb, op.Index = api.KVCAS, uint64(p.IfVersion)
	}
	ops = append(ops, &api.TxnOp{KV: op})
	ok, resp, err := s.b.ledger.txn(ctx, ops)
	if err != nil {
		return 0, fmt.Errorf("consul: control: put %s: %w", p.Key, err)
	}
	if !ok {
		if p.Token != 0 && resp.Errors[0].OpIndex == 0 {
			return 0, fmt.Errorf("consul: control: put %s with token %d: the term's session no longer holds %s: %w", p.Key, p.Token, s.b.cfg.Key, ledger.ErrStaleTerm)
		}
		return 0, fmt.Errorf("consul: control: %s at version %d: %s: %w", p.Key, p.IfVersion, resp.Errors[0].What, control.ErrVersionMismatch)
	}
	for _, r := range resp.Results {
		if r.KV != nil && r.KV.Key == s.root+p.Key {
			return int64(r.KV.ModifyIndex), nil
		}
	}
	return 0, fmt.Errorf("consul: control: put %s: the transaction's answer holds no entry", p.Key)
}

func (s *controlStore) Delete(ctx context.Context, key string, ifVersion int64) error {
	if err := control.CheckPut(control.Put{Key: key, IfVersion: ifVersion}); err != nil {
		return err
	}
	if ifVersion == 0 {
		return fmt.Errorf("consul: control: delete %s at version 0: %w", key, control.ErrVersionMismatch)
	}
	ops := api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.root + key}}}
	if ifVersion != control.AnyVersion {
		// A delete-cas of an absent key succeeds: check-index fails on
		// it, as on another index.
		ops = append(api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.root + key, Index: uint64(ifVersion)}}}, ops...)
	}
	ok, resp, err := s.b.ledger.txn(ctx, ops)
	if err != nil {
		return fmt.Errorf("consul: control: delete %s: %w", key, err)
	}
	if !ok {
		return fmt.Errorf("consul: control: delete %s at version %d: %s: %w", key, ifVersion, resp.Errors[0].What, control.ErrVersionMismatch)
	}
	return nil
}

// Fence implements control.Store: a Put with a token checks the term in
// its own transaction, so no write of an ended term can land later.
func (s *controlStore) Fence(ctx context.Context, token uint64) error { return nil }
