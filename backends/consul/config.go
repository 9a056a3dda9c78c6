package consul

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/election"
)

// Limits and defaults.
const (
	// DefaultTTL is the session TTL when Config.TTL is zero.
	DefaultTTL = 10 * time.Second
	// MinTTL is the smallest session TTL a Consul server accepts (its
	// session_ttl_min default).
	MinTTL = 10 * time.Second
	// MaxTTL is the largest session TTL a Consul server accepts.
	MaxTTL = 24 * time.Hour
	// DefaultLockDelay is the session lock-delay when Config.LockDelay is
	// zero: 1 ms, the smallest value the HTTP API can carry. Zero cannot be
	// sent (the API client omits it and the server then applies 15 s).
	DefaultLockDelay = time.Millisecond
	// MaxLockDelay is the largest lock-delay the server applies.
	MaxLockDelay = 60 * time.Second
	// DefaultWaitTime is the blocking-query wait when Config.WaitTime is
	// zero.
	DefaultWaitTime = 2 * time.Second
)

// Config configures a Backend. Zero values mean the documented defaults.
// New copies it; the caller's struct is never modified.
type Config struct {
	// Client talks to a Consul agent. Required. Address, ACL token
	// (api.Config.Token), TLS and datacenter come with it; the Backend
	// never closes it. The token needs session:write on the agent's node
	// and key:write on Key and on Key+"-ledger/" (one key_prefix rule on Key
	// covers both); Check verifies it.
	Client *api.Client
	// Key is the lock key, e.g. "service/baton/reports/leader". Required,
	// without a leading or trailing slash.
	//
	// To exclude `consul lock PREFIX cmd` (mutex mode, -n=1) on the same
	// prefix, set Key to PREFIX+"/.lock": that is the key `consul lock`
	// locks, and both put the same flags (api.LockFlagValue) on it, so each
	// waits for the other. A `consul lock -n N` semaphore (N > 1) uses the
	// key differently; Acquire then fails with ErrKeyConflict.
	//
	// The Ledger keeps its records under Key+"-ledger/".
	Key string
	// Timing is the lease timing. Zero TTL means DefaultTTL; TTL must be
	// between MinTTL and MaxTTL. See election.Timing for the others.
	election.Timing
	// LockDelay is the session's lock-delay: after Consul invalidates a
	// session (TTL expiry or `consul session destroy`), it refuses to lock
	// the keys that session held for this long. Zero means
	// DefaultLockDelay (1 ms); at most MaxLockDelay.
	//
	// Sessions are created without health checks, so Consul invalidates
	// them only on TTL expiry (2*TTL after the last renewal it received, by
	// which time the holder ended its term on its own deadline) or when
	// someone destroys them. Only against the latter, while the holder is
	// partitioned from Consul, does a lock-delay >= TTL add safety; it
	// also adds to every crash failover (2*TTL + LockDelay).
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
	// History is how many runs per job the ledger keeps. Zero means
	// schedulerhost.DefaultHistory.
	History int
	// Logger receives retried errors (Warn) and details (Debug). Nil
	// means slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Timing = c.Timing.WithDefaults(DefaultTTL)
	if c.LockDelay == 0 {
		c.LockDelay = DefaultLockDelay
	}
	if c.WaitTime == 0 {
		c.WaitTime = DefaultWaitTime
	}
	if c.History == 0 {
		c.History = defaultHistory
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every problem with c at once, after defaults are
// applied. Each problem names the field and its value.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("Client <nil>: required"))
	}
	switch {
	case c.Key == "":
		errs = append(errs, fmt.Errorf("Key %q: required", c.Key))
	case strings.HasPrefix(c.Key, "/") || strings.HasSuffix(c.Key, "/"):
		errs = append(errs, fmt.Errorf("Key %q: must not begin or end with a slash", c.Key))
	}
	if err := c.Timing.Validate(MinTTL, 0); err != nil {
		errs = append(errs, err)
	}
	if c.TTL > MaxTTL {
		errs = append(errs, fmt.Errorf("TTL %v: above the server maximum %v", c.TTL, MaxTTL))
	}
	if c.LockDelay < time.Millisecond {
		errs = append(errs, fmt.Errorf("LockDelay %v: must be at least 1ms (Consul counts whole milliseconds)", c.LockDelay))
	}
	if c.LockDelay > MaxLockDelay {
		errs = append(errs, fmt.Errorf("LockDelay %v: above the server maximum %v", c.LockDelay, MaxLockDelay))
	}
	if c.WaitTime < 0 {
		errs = append(errs, fmt.Errorf("WaitTime %v: must be positive", c.WaitTime))
	}
	if c.History < 0 {
		errs = append(errs, fmt.Errorf("History %d: must be positive", c.History))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consul: invalid config: %w", err)
	}
	return nil
}
