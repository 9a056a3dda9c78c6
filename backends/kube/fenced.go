package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// The ledger and the control store live in ConfigMaps that a term writes
// only by compare-and-swap (a PUT with the resourceVersion it read), each
// with data.fence, the highest token that wrote it. Kubernetes has no
// transaction over two objects, so a write is tied to the term twice:
//
//   - before it, the writer reads the Lease: the claim's token must be the
//     token of the baton term that holds it (holding);
//   - in it, the object's fence must not be above the token, and the
//     write raises it to the token.
//
// A new term's catch-up reads the ledger through fence: it raises each
// object's fence to its token by a write, before it reads what the object
// holds. A deposed term's claim then either landed before that write, and
// the new term reads it, or meets the raised fence (its PUT is refused
// with 409, it reads the object again, and finds the fence above its
// token): never both a claim the new term did not see and a run of it.

// casAttempts bounds the compare-and-swap loop of one write.
const casAttempts = 8

// maxObjectBytes bounds the data baton writes into one ConfigMap, well
// below the server's 1 MiB for a ConfigMap and etcd's 1.5 MiB request.
const maxObjectBytes = 768 << 10

// holding returns the token of the baton term that holds the Lease now:
// 0 when it has no holder, was never taken, or is held by a candidate
// that is not baton's (client-go keeps the annotation of the last baton
// term, whose identity is then not the holder).
func (b *Backend) holding(ctx context.Context) (uint64, error) {
	o, err := b.c.get(ctx, leases, b.ns, b.name)
	if isNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var id election.Identity
	if o.holder() == "" || json.Unmarshal([]byte(o.annotation(annoIdentity)), &id) != nil || id.ID != o.holder() {
		return 0, nil
	}
	return o.token(), nil
}

// stale is the error of a write by a term that no longer holds.
func stale(token, holder uint64, where string) error {
	if holder == 0 {
		return fmt.Errorf("%w: token %d: %s has no baton holder now", ledger.ErrStaleTerm, token, where)
	}
	return fmt.Errorf("%w: token %d: %s holds token %d", ledger.ErrStaleTerm, token, where, holder)
}

// objectLock serializes this process's writes of one ConfigMap, so that
// its own writes do not refuse each other, and keeps the object as the
// last write returned it.
type objectLock struct {
	sync.Mutex
	// last is the object as this process's last write left it, or nil.
	// A write starts from it instead of reading the object again; the
	// write's resourceVersion makes the server refuse it (409) if
	// another writer came between, and cas then reads afresh.
	last *object
}

// lock returns the lock of ConfigMap name.
func (b *Backend) lock(name string) *objectLock {
	m, _ := b.locks.LoadOrStore(name, new(objectLock))
	return m.(*objectLock)
}

// fenceMode says what cas does with the object's fence.
type fenceMode int

const (
	noFence   fenceMode = iota // leave it: a finish, a read
	mustHold                   // a fence above the token refuses the write; raise it to the token
	raiseOnly                  // raise it to the token if lower; never refuse (a catch-up's read)
)

// applyFenced applies mode with token to the fence in data, then apply:
// it refuses as stale a token below the fence under mustHold, and
// raises the fence to token (a change) unless mode is noFence. It
// reports whether data changed.
func applyFenced(name string, data map[string]any, token uint64, mode fenceMode, apply func(data map[string]any) (bool, error)) (bool, error) {
	s, _ := data["fence"].(string)
	fence, _ := strconv.ParseUint(s, 10, 64)
	if mode == mustHold && fence > token {
		return false, fmt.Errorf("%w: token %d: ConfigMap %s is fenced by token %d", ledger.ErrStaleTerm, token, name, fence)
	}
	changed, err := apply(data)
	if err != nil {
		return false, err
	}
	if mode != noFence && token > fence {
		data["fence"] = strconv.FormatUint(token, 10)
		changed = true
	}
	return changed, nil
}

// cas reads ConfigMap name (absent: empty), applies the fence mode with
// token, lets apply read and change its data (string values), and writes
// it back if anything changed, by compare-and-swap; a conflict starts
// over, apply included. It returns apply's error, a refusal as stale, or
// the server's.
//
// It starts from the object its last write returned, if it kept one, and
// saves a read. Only a write that the server takes proves that copy
// current, so every other outcome from it (a conflict, a refusal, apply's
// error, or nothing to write, as for a read) is decided again on a fresh
// read.
func (b *Backend) cas(ctx context.Context, name string, token uint64, mode fenceMode, apply func(data map[string]any) (changed bool, err error)) error {
	l := b.lock(name)
	l.Lock()
	defer l.Unlock()
	for range casAttempts {
		o, cached := l.last, l.last != nil
		l.last = nil
		create := false
		if !cached {
			var err error
			o, err = b.c.get(ctx, configMaps, b.ns, name)
			create = isNotFound(err)
			if create {
				o, err = configMaps.newObject(b.ns, name), nil
			}
			if err != nil {
				return err
			}
		}
		data := o.section("data")
		changed, err := applyFenced(name, data, token, mode, apply)
		if err != nil || !changed {
			if cached {
				continue // only a write proves the kept copy current
			}
			return err
		}
		if size := dataSize(data); size > maxObjectBytes {
			return fmt.Errorf("kube: ConfigMap %s would hold %d bytes, more than %d: keep fewer runs per job (History) or split the jobs over more elections", name, size, maxObjectBytes)
		}
		var out *object
		if create {
			out, err = b.c.create(ctx, configMaps, b.ns, o)
		} else {
			out, err = b.c.update(ctx, configMaps, b.ns, o)
		}
		if isConflict(err) {
			continue
		}
		if err != nil {
			return err
		}
		l.last = out
		return nil
	}
	return fmt.Errorf("kube: ConfigMap %s kept changing", name)
}

// dataSize is the bytes of a ConfigMap's data, keys and values.
func dataSize(data map[string]any) int {
	size := 0
	for k, v := range data {
		s, _ := v.(string)
		size += len(k) + len(s)
	}
	return size
}
