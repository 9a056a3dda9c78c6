package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/driver"
)

var _ driver.Controller = (*Backend)(nil)

// Control returns the election's control store (pauses, run-now
// requests, the instance registry; see package control) in one ConfigMap,
// Name-control: data.seq counts versions (a key deleted and made again
// never gets one back), and each entry is data["e.<hash of key>"], the
// JSON of its key, value and version. List is one read; Put and Delete
// one compare-and-swap each. A Put with a token (a leader's take, start
// or settling of a run-now request, its term's record) first reads the
// Lease, then must pass the object's fence and raises it to its token,
// as a claim does a ledger shard's (fenced.go); a new term raises the
// fence before it reads the requests (Fence), so that a deposed term's
// write whose read of the Lease came before the new term began is
// refused when it reaches the object. The writes without a token are
// not a term's: an operator's pause, resume and request, an instance's
// entry in the registry, and a run's outcome, which a run that ended
// after its term is still recorded by; each is conditioned on the
// version of the entry it read, where a later leader's write moves it.
// Its entries share the object's 768 KiB: thousands of pauses and
// requests, or 90 values of the largest size (control.MaxValue).
func (b *Backend) Control() control.Store { return &controlStore{b: b, name: b.name + "-control"} }

// AccountStore returns the store of the election's tick accounts
// (package audit; driver.Accounter): a ConfigMap of its own,
// Name-audit, that works as Name-control does, so that the accounts
// (up to audit.MaxBytes per job) never take the room of pauses and
// requests. Its 768 KiB hold about 90 accounts at their largest, and
// thousands of a few ranges each; past that a leader's write of an
// account is refused and logged, and nothing else is affected.
func (b *Backend) AccountStore() control.Store { return &controlStore{b: b, name: b.name + "-audit"} }

type controlStore struct {
	b    *Backend
	name string
}

type ctlEntry struct {
	Key     string `json:"k"`
	Value   []byte `json:"v"`
	Version int64  `json:"n"`
}

func ctlKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return "e." + hex.EncodeToString(h[:20])
}

func ctlRead(data map[string]any, key string) (ctlEntry, bool, error) {
	s, _ := data[ctlKey(key)].(string)
	if s == "" {
		return ctlEntry{}, false, nil
	}
	var e ctlEntry
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return ctlEntry{}, false, fmt.Errorf("kube: control entry %q: %w", key, err)
	}
	if e.Key != key {
		return ctlEntry{}, false, fmt.Errorf("kube: control entry %s holds key %q, not %q", ctlKey(key), e.Key, key)
	}
	return e, true, nil
}

// List implements control.Store: one read of the object.
func (s *controlStore) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	if err := control.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	o, err := s.b.c.get(ctx, configMaps, s.b.ns, s.name)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kube: control: list %q: %w", prefix, err)
	}
	var out []control.Entry
	for k, v := range o.section("data") {
		str, _ := v.(string)
		if !strings.HasPrefix(k, "e.") || str == "" {
			continue
		}
		var e ctlEntry
		if err := json.Unmarshal([]byte(str), &e); err != nil {
			return nil, fmt.Errorf("kube: control entry %s: %w", k, err)
		}
		if strings.HasPrefix(e.Key, prefix) {
			out = append(out, control.Entry{Key: e.Key, Value: e.Value, Version: e.Version})
		}
	}
	slices.SortFunc(out, func(a, b control.Entry) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// versionOf checks an entry's version against want (control.AnyVersion,
// 0 for absent, or a version).
func versionOf(key string, e ctlEntry, found bool, want int64) error {
	cur := int64(0)
	if found {
		cur = e.Version
	}
	if want != control.AnyVersion && want != cur {
		return fmt.Errorf("%w: %q is at version %d, not %d", control.ErrVersionMismatch, key, cur, want)
	}
	return nil
}

// Put implements control.Store.
func (s *controlStore) Put(ctx context.Context, p control.Put) (int64, error) {
	if err := control.CheckPut(p); err != nil {
		return 0, err
	}
	mode := noFence
	if p.Token != 0 {
		holder, err := s.b.holding(ctx)
		if err != nil {
			return 0, fmt.Errorf("kube: control: put %q: reading the Lease: %w", p.Key, err)
		}
		if holder != p.Token {
			return 0, stale(p.Token, holder, "Lease "+s.b.LeaseName())
		}
		mode = mustHold
	}
	var version int64
	err := s.b.cas(ctx, s.name, p.Token, mode, func(data map[string]any) (bool, error) {
		e, found, err := ctlRead(data, p.Key)
		if err != nil {
			return false, err
		}
		if err := versionOf(p.Key, e, found, p.IfVersion); err != nil {
			return false, err
		}
		seq, _ := data["seq"].(string)
		n, _ := strconv.ParseInt(seq, 10, 64)
		version = n + 1
		b, err := json.Marshal(ctlEntry{Key: p.Key, Value: p.Value, Version: version})
		if err != nil {
			return false, err
		}
		data["seq"], data[ctlKey(p.Key)] = strconv.FormatInt(version, 10), string(b)
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("kube: control: put %q: %w", p.Key, err)
	}
	return version, nil
}

// Delete implements control.Store.
func (s *controlStore) Delete(ctx context.Context, key string, ifVersion int64) error {
	if err := control.CheckKey(key); err != nil {
		return err
	}
	err := s.b.cas(ctx, s.name, 0, noFence, func(data map[string]any) (bool, error) {
		e, found, err := ctlRead(data, key)
		if err != nil {
			return false, err
		}
		if ifVersion == control.AnyVersion && !found {
			return false, nil
		}
		if err := versionOf(key, e, found, ifVersion); err != nil {
			return false, err
		}
		delete(data, ctlKey(key))
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("kube: control: delete %q: %w", key, err)
	}
	return nil
}

// Fence implements control.Store. It reads the Lease (the term with token
// must hold it), then raises the object's fence to token by a
// compare-and-swap, or finds it there: from then on a Put of an earlier
// term, whose read of the Lease came before this term began, meets the
// fence (its PUT is refused for the resourceVersion it carries, it reads
// the object again and finds the fence above its token). A fence above
// token means a later term began: ErrStaleTerm.
func (s *controlStore) Fence(ctx context.Context, token uint64) error {
	holder, err := s.b.holding(ctx)
	if err != nil {
		return fmt.Errorf("kube: control: fence: reading the Lease: %w", err)
	}
	if holder != token {
		return stale(token, holder, "Lease "+s.b.LeaseName())
	}
	err = s.b.cas(ctx, s.name, token, mustHold, func(map[string]any) (bool, error) { return false, nil })
	if err != nil {
		return fmt.Errorf("kube: control: fence at token %d: %w", token, err)
	}
	return nil
}
