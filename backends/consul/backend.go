package consul

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

var (
	_ election.Backend    = (*Backend)(nil)
	_ driver.LeaderReader = (*Backend)(nil)
	_ driver.Checker      = (*Backend)(nil)
)

// Backend is a Consul leader election on one key: a candidate creates a
// TTL session and locks the key with it (`?acquire=`, as `consul lock`
// does); whoever holds the lock leads. It implements election.Backend,
// driver.LeaderReader and driver.Checker. Its methods are safe for
// concurrent use.
//
// It does not use api.Lock: it owns the session, times every renewal
// from when it was sent, and ends a term at the local safe deadline (see
// driver.ManagedLease), which api.Lock does not do.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	ledger *tickLedger
}

// New returns a Backend for cfg after applying defaults and validating it.
// It does not talk to Consul.
func New(cfg Config) (*Backend, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, log: cfg.Logger.With("election", cfg.Key)}
	b.ledger = newLedger(b)
	return b, nil
}

// Key returns the lock key.
func (b *Backend) Key() string { return b.cfg.Key }

// Acquire implements election.Backend. It creates a session, waits with
// blocking queries while another session holds the key, and locks the key
// when it is free. While Consul refuses the key for a lock-delay (the
// last holder's session was invalidated, or a restarted server replayed
// such an invalidation), it asks again every 500 ms. It returns an error
// wrapping ctx's error if ctx ends first (never a nil Lease with a nil
// error); the session it created is destroyed then.
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
	// pause reports a retried error (if any) and waits before the next
	// try; it returns an error only when ctx is done. The Elector logs
	// the error (at Warn, at a bounded rate) and counts it.
	pause := func(what string, err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("consul: acquire: %w", ctx.Err())
		}
		if err != nil {
			driver.ReportAttempt(ctx, fmt.Errorf("consul: acquire %s: %s: %w", b.cfg.Key, what, err))
		}
		if err := retry.wait(ctx); err != nil {
			return fmt.Errorf("consul: acquire: %w", err)
		}
		return nil
	}
	var waitIndex uint64
	// relock: the last lock attempt was refused during a lock-delay, so
	// the key was free a moment ago; the next try locks at once, and a
	// refusal says whether it still is.
	relock := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("consul: acquire: %w", err)
		}
		// Keep the session alive while waiting.
		if err := b.keepSession(ctx, &s, id, b.cfg.Timing.RenewInterval/2); err != nil {
			if err := pause("session", err); err != nil {
				return nil, err
			}
			continue
		}
		if !relock {
			pair, meta, err := b.get(ctx, waitIndex)
			if err != nil {
				waitIndex = 0
				if err := pause("read lock key", err); err != nil {
					return nil, err
				}
				continue
			}
			driver.ReportAttempt(ctx, nil)
			if pair != nil && pair.Flags != api.LockFlagValue {
				return nil, fmt.Errorf("consul: acquire %s: flags %#x, want %#x: %w", b.cfg.Key, pair.Flags, uint64(api.LockFlagValue), ErrKeyConflict)
			}
			if pair != nil && pair.Session != "" && pair.Session != s.id {
				// Held by someone else: wait for a change.
				waitIndex = nextIndex(waitIndex, meta.LastIndex)
				retry.reset()
				continue
			}
			waitIndex = 0
		}
		relock = false
		// The lease's first deadline counts from the session's last
		// renewal: make it recent.
		if err := b.keepSession(ctx, &s, id, b.cfg.Timing.RenewInterval/4); err != nil {
			if err := pause("session", err); err != nil {
				return nil, err
			}
			continue
		}
		l, why, err := b.lock(ctx, &s, id)
		if l != nil {
			return l, nil
		}
		if why == refusedLockDelay {
			// Consul refuses the key until the lock-delay of the last
			// invalidation of a session holding it is over: LockDelay
			// after it, if that session used ours. But a server that
			// restarts re-applies, as it replays its raft log, the
			// lock-delay of every invalidation in the log, from the time
			// of the replay, even to a key released gracefully since (a
			// soak saw graceful handovers wait up to 6 s after a rolling
			// restart). Neither end is known here: ask again every
			// lockDelayPoll, so as to lead within that of the delay's end.
			b.log.Debug("consul lock refused during a lock-delay, asking again", "identity", id.ID, "in", lockDelayPoll.String())
			if err := sleep(ctx, lockDelayPoll); err != nil {
				return nil, fmt.Errorf("consul: acquire: %w", err)
			}
			retry.reset()
			relock = true
			continue
		}
		// Another candidate won the race, or our session is gone, or the
		// outcome is unknown: look again after a pause.
		s.check = true
		if err := pause("lock", err); err != nil {
			return nil, err
		}
	}
}

// lockDelayPoll is how often a candidate refused during a lock-delay
// asks again.
const lockDelayPoll = 500 * time.Millisecond

// requestTimeout bounds one non-blocking request.
func (b *Backend) requestTimeout() time.Duration {
	return max(b.cfg.Timing.RenewInterval, time.Second)
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
