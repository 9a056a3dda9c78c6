package etcd

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// Control returns the election's control store (pauses, run-now
// requests, the instance registry; see package control). Its entries are
// keys in the ledger's subtree, outside the election, where the ledger's
// permissions cover them (docs/backends/etcd.md, least privilege):
//
//	PREFIX-ledger/%control/<key>    the entry's value
//
// No job's keys are there: the ledger path-escapes job names, and a '%'
// of a name is escaped as "%25".
// An entry's version is its key's ModRevision: etcd's revisions are
// global and only grow, so a key deleted and made again never gets a
// version back. List is one range read; Put and Delete are one
// transaction each, whose comparisons (the version and, for a Put with a
// token, the create revision of the term's key, as a ledger claim
// checks it) are made atomically with the write; when one fails, the
// transaction's other branch reads the entry and the term's key, which
// tell which. A Put with a token finds the term's key once per token
// (one read of the election's candidates).
func (b *Backend) Control() control.Store {
	return &controlStore{b: b, root: b.prefix + "-ledger/%control/", terms: b.Ledger().(*tickLedger)}
}

type controlStore struct {
	b     *Backend
	root  string
	terms *tickLedger // finds and caches the key of a term
}

func (s *controlStore) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	if err := control.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	resp, err := s.b.cli.Get(ctx, s.root+prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("etcd: control: list %q: %w", prefix, err)
	}
	out := make([]control.Entry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, control.Entry{Key: string(kv.Key[len(s.root):]), Value: kv.Value, Version: kv.ModRevision})
	}
	return out, nil
}

// versionCmp is the comparison of key's entry with ifVersion, nil for
// AnyVersion.
func versionCmp(key string, ifVersion int64) []clientv3.Cmp {
	switch {
	case ifVersion == control.AnyVersion:
		return nil
	case ifVersion == 0:
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", ifVersion)}
}

func (s *controlStore) Put(ctx context.Context, p control.Put) (int64, error) {
	if err := control.CheckPut(p); err != nil {
		return 0, err
	}
	key := s.root + p.Key
	cmps := versionCmp(key, p.IfVersion)
	orElse := []clientv3.Op{clientv3.OpGet(key, clientv3.WithKeysOnly())}
	if p.Token != 0 {
		term, err := s.terms.termKey(ctx, p.Token)
		if err != nil {
			return 0, fmt.Errorf("etcd: control: put %s: find the key of term %d: %w", p.Key, p.Token, err)
		}
		if term == "" {
			return 0, fmt.Errorf("etcd: control: put %s with token %d: no leader key with that create revision: %w", p.Key, p.Token, ledger.ErrStaleTerm)
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(term), "=", int64(p.Token)))
		orElse = append(orElse, clientv3.OpGet(term, clientv3.WithKeysOnly()))
	}
	resp, err := s.b.cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(p.Value))).Else(orElse...).Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd: control: put %s: %w", p.Key, err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	if p.Token != 0 {
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 0 || kvs[0].CreateRevision != int64(p.Token) {
			return 0, fmt.Errorf("etcd: control: put %s with token %d: the term's key is gone: %w", p.Key, p.Token, ledger.ErrStaleTerm)
		}
	}
	return 0, mismatch(p.Key, p.IfVersion, resp.Responses[0].GetResponseRange().Kvs)
}

// mismatch is the error of a failed version comparison, saying what the
// entry was.
func mismatch(key string, want int64, kvs []*mvccpb.KeyValue) error {
	if len(kvs) == 0 {
		return fmt.Errorf("etcd: control: %s at version %d: absent: %w", key, want, control.ErrVersionMismatch)
	}
	return fmt.Errorf("etcd: control: %s at version %d: at %d: %w", key, want, kvs[0].ModRevision, control.ErrVersionMismatch)
}

func (s *controlStore) Delete(ctx context.Context, key string, ifVersion int64) error {
	if err := control.CheckPut(control.Put{Key: key, IfVersion: ifVersion}); err != nil {
		return err
	}
	if ifVersion == 0 {
		return fmt.Errorf("etcd: control: delete %s at version 0: %w", key, control.ErrVersionMismatch)
	}
	k := s.root + key
	resp, err := s.b.cli.Txn(ctx).If(versionCmp(k, ifVersion)...).Then(clientv3.OpDelete(k)).
		Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return fmt.Errorf("etcd: control: delete %s: %w", key, err)
	}
	if !resp.Succeeded {
		return mismatch(key, ifVersion, resp.Responses[0].GetResponseRange().Kvs)
	}
	return nil
}

// Fence implements control.Store: a Put with a token checks the term in
// its own transaction, so no write of an ended term can land later.
func (s *controlStore) Fence(ctx context.Context, token uint64) error { return nil }
