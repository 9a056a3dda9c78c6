// Package control keeps the operators' state of an election in its
// backend, beside the lease and the ledger: which jobs are paused, the
// run-now requests and the registry of instances. Because it lives in the
// backend, it holds across failovers and restarts and reads the same from
// every instance.
//
// Store is what a backend implements (etcd's, the SQL, Consul's and
// Redis's (*Backend).Control); Jobs and Registry are the typed layer the
// Host and the node use on top of it.
package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Store is a small keyed store of one election, in its backend. Keys are
// short printable strings (see CheckKey); values are small (MaxValue).
// Every write of an entry gives it a new version, greater than any
// version it had, so that a conditional write can tell whether the entry
// changed since it was read. Its methods may be called from several
// goroutines at once and block on backend I/O, bounded by ctx.
type Store interface {
	// List returns every entry whose key starts with prefix, in key order,
	// as one consistent read.
	List(ctx context.Context, prefix string) ([]Entry, error)
	// Put writes p.Value at p.Key if p's conditions hold, atomically with
	// checking them, and returns the entry's new version:
	//   - p.IfVersion: AnyVersion writes whatever the entry is, 0 only if
	//     the key is absent, v > 0 only if the entry's version is v;
	//   - p.Token: if not zero, only if the term with that fencing token
	//     still holds the election (by the backend's clock), as a ledger
	//     claim checks it.
	// A failed version condition returns an error wrapping
	// ErrVersionMismatch, a failed term condition one wrapping
	// ledger.ErrStaleTerm; if both fail, either may be returned. Any other
	// error means the write may or may not have happened.
	Put(ctx context.Context, p Put) (version int64, err error)
	// Delete removes key if its version is ifVersion (AnyVersion: whatever
	// it is). With AnyVersion, deleting an absent key is not an error;
	// with a version, it returns an error wrapping ErrVersionMismatch.
	Delete(ctx context.Context, key string, ifVersion int64) error
	// Fence is called by the term with token before it reads what earlier
	// terms wrote. Once it returns nil, no Put with a lower token lands:
	// a write of an earlier term still on its way either landed before
	// (and a read after Fence sees it) or is refused with ErrStaleTerm.
	// A store that checks the term atomically with each write has this
	// already and returns nil; one that checks the term before the write
	// (Kubernetes: a read of the Lease, then a compare-and-swap) raises a
	// fence that every write with a token must pass, and returns an error
	// wrapping ledger.ErrStaleTerm if a later term raised it already.
	Fence(ctx context.Context, token uint64) error
}

// Entry is one stored entry.
type Entry struct {
	Key     string
	Value   []byte
	Version int64
}

// Put is one conditional write (see Store.Put).
type Put struct {
	Key       string
	Value     []byte
	IfVersion int64
	Token     uint64
}

// AnyVersion as a Put's IfVersion, or Delete's ifVersion, sets no
// condition on the entry.
const AnyVersion int64 = -1

// MaxKey and MaxValue bound an entry's key and value, in bytes: every
// backend stores entries of these sizes.
const (
	MaxKey   = 256
	MaxValue = 8 << 10
)

// ErrVersionMismatch: a conditional write found the entry at another
// version than asked (or absent, or present when asked absent).
var ErrVersionMismatch = errors.New("control: entry changed")

// CheckKey says why key cannot be stored, or nil: it must be 1 to MaxKey
// bytes of printable ASCII without spaces.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKey {
		return fmt.Errorf("control: key %q: must be 1 to %d bytes", trunc(key), MaxKey)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("control: key %q: byte %d is %#x, want printable ASCII without spaces", trunc(key), i, c)
		}
	}
	return nil
}

// CheckPut says why p cannot be stored, or nil: its key (CheckKey), its
// value's size and its IfVersion.
func CheckPut(p Put) error {
	if err := CheckKey(p.Key); err != nil {
		return err
	}
	if len(p.Value) > MaxValue {
		return fmt.Errorf("control: key %q: value of %d bytes, more than %d", p.Key, len(p.Value), MaxValue)
	}
	if p.IfVersion < AnyVersion {
		return fmt.Errorf("control: key %q: IfVersion %d, want AnyVersion, 0 or a version", p.Key, p.IfVersion)
	}
	return nil
}

// CheckPrefix says why prefix cannot be listed: like a key, but it may be
// empty (every entry).
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return CheckKey(prefix)
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Segment makes a job name or an id into one key segment: path-escaped,
// so that it holds no '/' and only printable ASCII.
func Segment(s string) string { return escape(s) }

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > ' ' && c < 0x7f && c != '/' && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
