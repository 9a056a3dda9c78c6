package consul

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Limits and defaults.
const (
	// DefaultTTL is the session TTL when Config.Timing.TTL is zero.
	DefaultTTL = 10 * time.Second
	// MinTTL is the smallest session TTL a Consul server accepts (its
	// session_ttl_min default).
	MinTTL = 10 * time.Second
	// MaxTTL is the largest session TTL a Consul server accepts.
	MaxTTL = 24 * time.Hour
	// MaxLockDelay is the largest lock-delay the server applies.
	MaxLockDelay = 60 * time.Second
	// DefaultWaitTime is the blocking-query wait when Config.WaitTime is
	// zero.
	DefaultWaitTime = 2 * time.Second
)

// limits are Consul's bounds and defaults for the fields every backend's
// Config has.
var limits = driver.BackendLimits{
	Client:         "Client",
	DefaultTTL:     DefaultTTL,
	MinTTL:         MinTTL,
	MaxTTL:         MaxTTL,
	DefaultHistory: ledger.DefaultHistory,
}

// Config configures a Backend. Zero values mean the documented defaults.
// New copies it; the caller's struct is never modified.
type Config struct {
	// Client talks to a Consul agent. Required. Address, ACL token
	// (api.Config.Token), TLS and datacenter come with it; the Backend
	// never closes it. The token needs session:write on the agent's node
	// and key:write on Key and on Key+"-ledger/" (one key_prefix rule on Key
	// covers both); Check verifies it.
	Client *api.Client
	// Key is the lock key, e.g. LockKey("service/baton/reports"), which
	// is "service/baton/reports/.lock". Required, without a leading or
	// trailing slash.
	//
	// LockKey(PREFIX) is the key `consul lock PREFIX cmd` (mutex mode,
	// -n=1) locks, and both put the same flags (api.LockFlagValue) on it,
	// so each waits for the other. A `consul lock -n N` semaphore (N > 1)
	// uses the key differently; Acquire then fails with ErrKeyConflict.
	//
	// The Ledger keeps its records under Key+"-ledger/".
	Key string
	// Timing is the lease timing. Zero TTL means DefaultTTL; TTL must be
	// between MinTTL and MaxTTL. See election.Timing for the others.
	Timing election.Timing
	// LockDelay is the session's lock-delay: after Consul invalidates a
	// session by any means other than the holder's own release, it
	// refuses to lock the keys that session held for this long. Zero means
	// the TTL (at most MaxLockDelay). It must be at least
	// MinLockDelay(Timing); Validate rejects a shorter one.
	//
	// Sessions are created without health checks, so a node failure alone
	// does not invalidate them; but Consul deletes every session of a node
	// that is deregistered, checks or not: `consul force-leave` of a
	// failed node, a client agent's graceful leave, a catalog deregister,
	// the reaping of a node failed for longer than reconnect_timeout. So
	// does `consul session destroy`, and TTL expiry (2*TTL after the last
	// renewal the server received). The leader may then be cut off from
	// Consul (its agent is the node that died) and still lead until its
	// local deadline: at most TTL - SafetyMargin after it sent its last
	// successful renewal, which Consul processed, so the leader sent it,
	// before the invalidation. A lock-delay of at least MinLockDelay keeps
	// the key locked until that deadline has passed: the next leader
	// starts only after the old one stopped. An explicit
	// Release unlocks the key before it destroys the session, so a
	// graceful handover does not wait for the lock-delay. A crash failover
	// does: it takes up to 2*TTL + LockDelay (30 s at the defaults).
	LockDelay time.Duration
	// WaitTime is how long one blocking query on the key waits for a
	// change before it is sent again (while waiting to lead, and while
	// leading, to learn of a loss). Zero means DefaultWaitTime (2 s).
	// Cancelling Acquire's ctx aborts a blocking query at once whatever
	// its WaitTime.
	WaitTime time.Duration
	// SessionName names the sessions in the Consul UI and in
	// `consul operator`/`/v1/session/list` output. Empty means
	// "baton " + Identity.ID + " " + Key.
	SessionName string
	// History is how many runs per job the ledger keeps: a ring of that
	// many keys per job (see Backend.Ledger). Zero means
	// ledger.DefaultHistory.
	History int
	// Logger receives retried errors (Warn) and details (Debug). Nil
	// means slog.Default().
	Logger *slog.Logger
}

// MinLockDelay is the shortest LockDelay Validate accepts with timing t
// (zero fields mean their defaults): the leader's window TTL -
// SafetyMargin, the longest it can go on leading after the last renewal it
// sent, plus a tenth of it for the difference between the leader's and
// the Consul server's clock rates and for the leader's scheduling delay,
// rounded up to a whole millisecond (the unit Consul counts in). At the
// defaults (TTL 10 s, SafetyMargin 2 s) it is 8.8 s; the default
// LockDelay, the TTL, is longer.
//
// A shorter window lets a shorter LockDelay suffice, and a crash failover
// (2*TTL + LockDelay) end sooner, at the price of a leader that gives up
// sooner when Consul does not answer: with TTL 10 s, RenewInterval 1 s and
// SafetyMargin 7 s, the window is 3 s and MinLockDelay 3.3 s.
func MinLockDelay(t election.Timing) time.Duration {
	t = t.WithDefaults(DefaultTTL)
	w := t.TTL - t.SafetyMargin
	if w <= 0 {
		return time.Millisecond
	}
	d := w + w/10
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}

// LockKey returns the key that `consul lock prefix cmd` locks:
// prefix + "/.lock". A Backend whose Key it is and `consul lock prefix`
// exclude each other.
func LockKey(prefix string) string { return prefix + "/.lock" }

func (c Config) withDefaults() Config {
	c.Timing, c.History, c.Logger = limits.Defaults(c.Timing, c.History, c.Logger)
	if c.LockDelay == 0 {
		c.LockDelay = min(c.Timing.TTL, MaxLockDelay)
	}
	if c.WaitTime == 0 {
		c.WaitTime = DefaultWaitTime
	}
	return c
}

// Validate reports every problem with c at once, after defaults are
// applied. Each problem names the field and its value.
func (c Config) Validate() error {
	_, err := c.resolved()
	return err
}

// resolved returns c with its defaults applied, which New builds a Backend
// from, and every problem with it (nil when there is none).
func (c Config) resolved() (Config, error) {
	c = c.withDefaults()
	errs := limits.Problems(c.Client != nil, c.Timing, c.History)
	switch {
	case c.Key == "":
		errs = append(errs, fmt.Errorf("Key %q: required", c.Key))
	case strings.HasPrefix(c.Key, "/") || strings.HasSuffix(c.Key, "/"):
		errs = append(errs, fmt.Errorf("Key %q: must not begin or end with a slash", c.Key))
	}
	timingOK := c.Timing.Validate(MinTTL, 0) == nil
	if c.LockDelay < time.Millisecond {
		errs = append(errs, fmt.Errorf("LockDelay %v: must be at least 1ms (Consul counts whole milliseconds)", c.LockDelay))
	} else {
		if c.LockDelay > MaxLockDelay {
			errs = append(errs, fmt.Errorf("LockDelay %v: above the server maximum %v", c.LockDelay, MaxLockDelay))
		}
		// Consul counts the lock-delay in whole milliseconds, dropping
		// the rest.
		minDelay := MinLockDelay(c.Timing)
		if timingOK && c.LockDelay.Truncate(time.Millisecond) < minDelay {
			hint := "leave it zero (the TTL) or set at least that"
			if minDelay > MaxLockDelay {
				hint = fmt.Sprintf("that is above the server maximum %v: shorten the window with a smaller TTL or a larger SafetyMargin", MaxLockDelay)
			}
			errs = append(errs, fmt.Errorf("LockDelay %v: below MinLockDelay %v (TTL %v - SafetyMargin %v, plus a tenth): "+
				"after a node deregistration Consul would give the key to another candidate while this leader still leads; %s",
				c.LockDelay, minDelay, c.Timing.TTL, c.Timing.SafetyMargin, hint))
		}
	}
	if c.WaitTime < 0 {
		errs = append(errs, fmt.Errorf("WaitTime %v: must be positive", c.WaitTime))
	}
	return c, driver.InvalidConfig("consul", errs)
}
