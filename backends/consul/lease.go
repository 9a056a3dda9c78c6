package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

// term is one held lock.
type term struct {
	session string
	token   uint64
	value   value
	lease   *driver.ManagedLease
}

// newLease builds the managed lease of term t: it renews t's session,
// watches the key with blocking queries, and on release unlocks the key
// and destroys the session.
func (b *Backend) newLease(t *term, sent time.Time, id election.Identity) *driver.ManagedLease {
	return driver.NewManagedLease(driver.ManagedLeaseConfig{
		Timing: b.cfg.Timing,
		Sent:   sent,
		Renew: func(ctx context.Context) (time.Duration, error) {
			e, _, err := b.cfg.Client.Session().Renew(t.session, (&api.WriteOptions{}).WithContext(ctx))
			if err != nil {
				return 0, fmt.Errorf("consul: renew session %s: %w", t.session, err)
			}
			if e == nil {
				return 0, election.LostError(fmt.Errorf("%w: %s", ErrSessionGone, t.session))
			}
			ttl, err := time.ParseDuration(e.TTL)
			if err != nil {
				ttl = 0 // Timing.TTL
			}
			return ttl, nil
		},
		Watch: func(ctx context.Context) error {
			var index uint64 = t.token
			for {
				pair, meta, err := b.get(ctx, index)
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					return fmt.Errorf("%w: %v", driver.ErrRetryWatch, err)
				}
				switch {
				case pair == nil:
					return fmt.Errorf("%w: key %s deleted", ErrLockLost, b.cfg.Key)
				case pair.Session != t.session:
					return fmt.Errorf("%w: key %s held by session %q, ours is %s", ErrLockLost, b.cfg.Key, pair.Session, t.session)
				}
				index = nextIndex(index, meta.LastIndex)
			}
		},
		Release: func(ctx context.Context) error {
			wo := (&api.WriteOptions{}).WithContext(ctx)
			// Unlock first, so that a waiting candidate takes over at
			// once: an explicit release sets no lock-delay, a session
			// invalidation does. Releasing with a session that no longer
			// holds the key changes nothing.
			_, _, rerr := b.cfg.Client.KV().Release(&api.KVPair{Key: b.cfg.Key, Flags: api.LockFlagValue, Session: t.session, Value: t.releasedValue()}, wo)
			if rerr != nil {
				rerr = fmt.Errorf("consul: unlock %s: %w", b.cfg.Key, rerr)
			}
			_, derr := b.cfg.Client.Session().Destroy(t.session, wo)
			if derr != nil {
				derr = fmt.Errorf("consul: destroy session %s: %w", t.session, derr)
			}
			return errors.Join(rerr, derr)
		},
		Logger: b.log.With("identity", id.ID, "token", t.token),
	})
}

// releasedValue is the value left in the key after an unlock: the last
// term's identity and token, with no session holding it.
func (t *term) releasedValue() []byte {
	raw, _ := json.Marshal(t.value)
	return raw
}

// get reads the key; with index > 0 it is a blocking query that returns
// when the key's index passes index or after WaitTime. It is bounded by a
// timeout of its own, so that a silently dead connection is noticed.
func (b *Backend) get(ctx context.Context, index uint64) (*api.KVPair, *api.QueryMeta, error) {
	timeout := b.requestTimeout()
	if index > 0 {
		timeout += b.cfg.WaitTime + b.cfg.WaitTime/16
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q := &api.QueryOptions{WaitIndex: index, WaitTime: b.cfg.WaitTime}
	return b.cfg.Client.KV().Get(b.cfg.Key, q.WithContext(rctx))
}

// nextIndex is the index for the next blocking query after one that
// returned got, following Consul's advice: reset if it went backwards.
func nextIndex(prev, got uint64) uint64 {
	if got < prev {
		return 0
	}
	return got
}
