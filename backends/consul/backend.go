package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/kit"
)

var (
	_ election.Backend      = (*Backend)(nil)
	_ election.LeaderReader = (*Backend)(nil)
	_ election.Checker      = (*Backend)(nil)
)

// Backend is a Consul leader election on one key: a candidate creates a
// TTL session and locks the key with it (`?acquire=`, as `consul lock`
// does); whoever holds the lock leads. It implements election.Backend,
// election.LeaderReader and election.Checker. Its methods are safe for
// concurrent use.
//
// It does not use api.Lock: it owns the session, times every renewal
// from when it was sent, and ends a term at the local safe deadline (see
// kit.ManagedLease), which api.Lock does not do.
type Backend struct {
	cfg Config
	log *slog.Logger
}

// New returns a Backend for cfg after applying defaults and validating it.
// It does not talk to Consul.
func New(cfg Config) (*Backend, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	return &Backend{cfg: cfg, log: cfg.Logger.With("election", cfg.Key)}, nil
}

// Key returns the lock key.
func (b *Backend) Key() string { return b.cfg.Key }

// value is the JSON stored in the lock key, so that the Consul UI and
// `consul kv get` show who leads. Token is filled in right after the lock
// is taken (it is the ModifyIndex of the lock operation, unknown before).
type value struct {
	election.Identity
	Session  string    `json:"session"`
	Token    uint64    `json:"token,omitempty"`
	Acquired time.Time `json:"acquired,omitzero"`
}

// term is one held lock.
type term struct {
	session string
	token   uint64
	value   value
	lease   *kit.ManagedLease
}

// session is a Consul session being kept alive by Acquire while it waits.
type session struct {
	id    string
	sent  time.Time // when the last successful create or renew was sent
	check bool      // renew before the next lock attempt, to learn whether it is still alive
}

// Acquire implements election.Backend. It creates a session, waits with
// blocking queries while another session holds the key, and locks the key
// when it is free. If Consul refuses the key because the last holder's
// session was invalidated less than its lock-delay ago, it waits until
// LockDelay after it saw the key freed (re-trying at least every
// RenewInterval/2, in case the last holder's lock-delay was shorter). It
// returns an error wrapping ctx's error if ctx ends first (never a nil
// Lease with a nil error); the session it created is destroyed then.
// Other errors (ErrKeyConflict) are returned at once. Transient Consul
// errors are logged and retried.
func (b *Backend) Acquire(ctx context.Context, id election.Identity) (_ election.Lease, err error) {
	var s session
	defer func() {
		if err != nil && s.id != "" {
			b.destroy(ctx, s.id)
		}
	}()
	retry := backoff{min: 10 * time.Millisecond, max: time.Second}
	// pause logs a retried error (if any) and waits before the next try;
	// it returns an error only when ctx is done.
	pause := func(msg string, err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("consul: acquire: %w", ctx.Err())
		}
		if err != nil {
			b.log.Warn(msg, "identity", id.ID, "err", err)
		}
		if err := retry.wait(ctx); err != nil {
			return fmt.Errorf("consul: acquire: %w", err)
		}
		return nil
	}
	var waitIndex uint64
	// freeSince is when this candidate first saw the key unlocked since it
	// last saw it locked: a lock-delay started no later than that.
	var freeSince time.Time
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("consul: acquire: %w", err)
		}
		// Keep the session alive while waiting.
		if err := b.keepSession(ctx, &s, id, b.cfg.Timing.RenewInterval/2); err != nil {
			if err := pause("consul session, retrying", err); err != nil {
				return nil, err
			}
			continue
		}
		pair, meta, err := b.get(ctx, waitIndex)
		if err != nil {
			waitIndex = 0
			if err := pause("consul read lock key, retrying", err); err != nil {
				return nil, err
			}
			continue
		}
		if pair != nil && pair.Flags != api.LockFlagValue {
			return nil, fmt.Errorf("consul: acquire %s: flags %#x, want %#x: %w", b.cfg.Key, pair.Flags, uint64(api.LockFlagValue), ErrKeyConflict)
		}
		if pair != nil && pair.Session != "" && pair.Session != s.id {
			// Held by someone else: wait for a change.
			waitIndex = nextIndex(waitIndex, meta.LastIndex)
			freeSince = time.Time{}
			retry.reset()
			continue
		}
		waitIndex = 0
		if freeSince.IsZero() {
			freeSince = time.Now()
		}
		// The lease's first deadline counts from the session's last
		// renewal: make it recent.
		if err := b.keepSession(ctx, &s, id, b.cfg.Timing.RenewInterval/4); err != nil {
			if err := pause("consul session, retrying", err); err != nil {
				return nil, err
			}
			continue
		}
		l, why, err := b.lock(ctx, &s, id)
		if l != nil {
			return l, nil
		}
		if why == refusedLockDelay {
			// The last holder's session was invalidated, not released,
			// at most LockDelay (if it used ours) before freeSince.
			if wait := time.Until(freeSince.Add(b.cfg.LockDelay)); wait > 0 {
				b.log.Debug("consul lock refused during the last holder's lock-delay, waiting", "identity", id.ID, "wait", wait.Round(time.Millisecond).String())
				if err := sleep(ctx, min(wait, b.cfg.Timing.RenewInterval/2)); err != nil {
					return nil, fmt.Errorf("consul: acquire: %w", err)
				}
				retry.reset()
				continue
			}
		} else {
			// Another candidate won the race, or our session is gone.
			s.check = true
		}
		// Refused or failed: look again after a pause.
		if err := pause("consul lock, retrying", err); err != nil {
			return nil, err
		}
	}
}

// keepSession makes sure s is a live session whose last create or renew
// was sent less than maxAge ago.
func (b *Backend) keepSession(ctx context.Context, s *session, id election.Identity, maxAge time.Duration) error {
	if s.id != "" && !s.check && time.Since(s.sent) < maxAge {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, b.requestTimeout())
	defer cancel()
	wo := (&api.WriteOptions{}).WithContext(rctx)
	sent := time.Now()
	if s.id != "" {
		e, _, err := b.cfg.Client.Session().Renew(s.id, wo)
		if err != nil {
			return fmt.Errorf("renew %s: %w", s.id, err)
		}
		if e != nil {
			s.sent, s.check = sent, false
			return nil
		}
		b.log.Debug("consul session gone while waiting, creating another", "identity", id.ID, "session", s.id)
		s.id = ""
	}
	name := b.cfg.SessionName
	if name == "" {
		name = "baton " + id.ID + " " + b.cfg.Key
	}
	// No health checks, so that a node marked failed (its agent died or
	// is unreachable) does not invalidate the session. Consul still
	// deletes it if the node is deregistered (force-leave, leave, catalog
	// deregister) or someone destroys it, while the holder may be cut off
	// and leading; the lock-delay, at least MinLockDelay, keeps the key
	// from the next candidate until the holder's deadline has passed.
	sid, _, err := b.cfg.Client.Session().CreateNoChecks(&api.SessionEntry{
		Name:      name,
		TTL:       b.cfg.Timing.TTL.String(),
		LockDelay: b.cfg.LockDelay,
		Behavior:  api.SessionBehaviorRelease,
	}, wo)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	s.id, s.sent, s.check = sid, sent, false
	return nil
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

func (b *Backend) newLease(t *term, sent time.Time, id election.Identity) *kit.ManagedLease {
	return kit.NewManagedLease(kit.ManagedLeaseConfig{
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
					return fmt.Errorf("%w: %v", kit.ErrRetryWatch, err)
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

// destroy destroys a session Acquire created but is giving up, bounded by
// a short timeout of its own (ctx may be done already).
func (b *Backend) destroy(ctx context.Context, sid string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 500*time.Millisecond)
	defer cancel()
	if _, err := b.cfg.Client.Session().Destroy(sid, (&api.WriteOptions{}).WithContext(dctx)); err != nil {
		b.log.Debug("consul destroy session", "session", sid, "err", err)
	}
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

// requestTimeout bounds one non-blocking request.
func (b *Backend) requestTimeout() time.Duration {
	return max(b.cfg.Timing.RenewInterval, time.Second)
}

// nextIndex is the index for the next blocking query after one that
// returned got, following Consul's advice: reset if it went backwards.
func nextIndex(prev, got uint64) uint64 {
	if got < prev {
		return 0
	}
	return got
}

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

// backoff is a doubling pause between retries.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) reset() { b.cur = 0 }

func (b *backoff) wait(ctx context.Context) error {
	b.cur = min(max(2*b.cur, b.min), b.max)
	return sleep(ctx, b.cur)
}

// sleep waits for d or until ctx is done (then it returns ctx's error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
