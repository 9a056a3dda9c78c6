package redis

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Timing limits of Redis leases.
const (
	// DefaultTTL is the lease TTL when Config.Timing.TTL is zero.
	DefaultTTL = 5 * time.Second
	// MinTTL is the smallest TTL accepted.
	MinTTL = time.Second
)

// Batch limits.
const (
	// DefaultMaxBatch is Config.MaxBatch when it is zero: claims, or
	// finishes, per script call. See doc.go for the measurement.
	DefaultMaxBatch = 500
	// MaxMaxBatch is the largest MaxBatch accepted: a script blocks the
	// server while it runs.
	MaxMaxBatch = 5000
	// lastPage is how many jobs one HMGET of LastClaimed reads.
	lastPage = 1000
)

// limits are Redis's bounds and defaults for the fields every backend's
// Config has.
var limits = election.BackendLimits{
	Client:         "Addr",
	DefaultTTL:     DefaultTTL,
	MinTTL:         MinTTL,
	TTLUnit:        time.Millisecond,
	DefaultHistory: ledger.DefaultHistory,
}

// electionName is what Config.Election may hold: its keys are
// baton:{ELECTION}:..., so braces would move the hash tag, and glob
// characters would make the ACL key pattern of doc.go match other keys.
var electionName = regexp.MustCompile(`^[A-Za-z0-9._:/-]{1,200}$`)

// Config configures a Backend. Zero values mean the documented defaults.
// New copies it; the caller's struct is never modified.
type Config struct {
	// Addr is the server's host:port. Required.
	Addr string
	// Username and Password authenticate with an ACL user (Redis 6 and
	// later); Password alone authenticates as the default user
	// (requirepass). Empty means no authentication.
	Username string
	Password string
	// TLS, if not nil, is used to connect with TLS. Its ServerName
	// defaults to Addr's host.
	TLS *tls.Config
	// Election names the election, e.g. "reports". Required: 1 to 200
	// of the characters A-Z a-z 0-9 . _ : / -. Every key of the election
	// starts with "baton:{ELECTION}:", so all of them share one hash slot.
	Election string
	// Timing is the lease timing. TTL must be whole milliseconds, at least
	// MinTTL; zero means DefaultTTL. See election.Timing for the others.
	// Followers also look for an expired lease every RenewInterval.
	Timing election.Timing
	// History is how many runs per job the Ledger keeps. Zero means
	// ledger.DefaultHistory.
	History int
	// MaxBatch is how many claims, or finishes, one script call of the
	// Ledger carries. Zero means DefaultMaxBatch; at most MaxMaxBatch.
	MaxBatch int
	// DialTimeout bounds each connection attempt. Zero means
	// min(TTL/2, 5s).
	DialTimeout time.Duration
	// Logger receives debug details and retry warnings. Nil means
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Timing, c.History, c.Logger = limits.Defaults(c.Timing, c.History, c.Logger)
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = min(c.Timing.TTL/2, 5*time.Second)
	}
	return c
}

// Validate reports every problem with c at once, after defaults are
// applied. Each problem names the field and its value.
func (c Config) Validate() error {
	_, err := c.resolved()
	return err
}

// resolved returns c with its defaults applied and every problem with it.
func (c Config) resolved() (Config, error) {
	c = c.withDefaults()
	errs := limits.Problems(true, c.Timing, c.History)
	if c.Addr == "" {
		errs = append(errs, fmt.Errorf("Addr %q: required (host:port)", c.Addr))
	}
	if !electionName.MatchString(c.Election) {
		errs = append(errs, fmt.Errorf("Election %q: must be 1 to 200 of A-Z a-z 0-9 . _ : / - (keys are baton:{Election}:...)", c.Election))
	}
	if c.MaxBatch < 1 || c.MaxBatch > MaxMaxBatch {
		errs = append(errs, fmt.Errorf("MaxBatch %d: must be between 1 and %d", c.MaxBatch, MaxMaxBatch))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("DialTimeout %v: must not be negative", c.DialTimeout))
	}
	if c.Password == "" && c.Username != "" {
		errs = append(errs, fmt.Errorf("Password %q: required with Username %q", "", c.Username))
	}
	return c, election.InvalidConfig("redis", errs)
}
