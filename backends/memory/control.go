package memory

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// Control returns the store's control store: a Put with a token succeeds
// only while that token's lease is the live one, as on a real backend.
func (m *Server) Control() control.Store { return memControl{m} }

type memControl struct{ m *Server }

var _ control.Store = memControl{}

type memEntry struct {
	value   []byte
	version int64
}

func (c memControl) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	if err := control.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []control.Entry
	for k, e := range m.ctl {
		if strings.HasPrefix(k, prefix) {
			out = append(out, control.Entry{Key: k, Value: append([]byte{}, e.value...), Version: e.version})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (c memControl) Put(ctx context.Context, p control.Put) (int64, error) {
	if err := control.CheckPut(p); err != nil {
		return 0, err
	}
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.Token != 0 {
		if h := m.holderLocked(); h == nil || h.token != p.Token {
			return 0, fmt.Errorf("memory: put %s with token %d: %w", p.Key, p.Token, ledger.ErrStaleTerm)
		}
	}
	if err := m.ctlMatchLocked(p.Key, p.IfVersion); err != nil {
		return 0, err
	}
	if m.ctl == nil {
		m.ctl = map[string]memEntry{}
	}
	m.ctlVersion++
	m.ctl[p.Key] = memEntry{value: append([]byte{}, p.Value...), version: m.ctlVersion}
	return m.ctlVersion, nil
}

func (c memControl) Delete(ctx context.Context, key string, ifVersion int64) error {
	if err := control.CheckPut(control.Put{Key: key, IfVersion: ifVersion}); err != nil {
		return err
	}
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if ifVersion == control.AnyVersion {
		delete(m.ctl, key)
		return nil
	}
	if ifVersion == 0 {
		return fmt.Errorf("memory: delete %s at version 0: %w", key, control.ErrVersionMismatch)
	}
	if err := m.ctlMatchLocked(key, ifVersion); err != nil {
		return err
	}
	m.ctlVersion++ // a delete is a change too
	delete(m.ctl, key)
	return nil
}

// ctlMatchLocked says whether key's entry matches ifVersion (see
// control.Put.IfVersion).
func (m *Server) ctlMatchLocked(key string, ifVersion int64) error {
	e, ok := m.ctl[key]
	switch {
	case ifVersion == control.AnyVersion:
		return nil
	case ifVersion == 0 && !ok:
		return nil
	case ok && e.version == ifVersion:
		return nil
	}
	return fmt.Errorf("memory: %s at version %d (present %v, version %d): %w", key, ifVersion, ok, e.version, control.ErrVersionMismatch)
}

// Fence implements control.Store: a Put with a token checks the term
// under the server's lock, so no write of an ended term can land later.
func (c memControl) Fence(ctx context.Context, token uint64) error { return nil }
