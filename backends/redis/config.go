package redis

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"time"

	"github.com/batonhq/baton/driver"
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
var limits = driver.BackendLimits{
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
	// Addr is a single server's host:port. Exactly one of Addr,
	// SentinelAddrs and ClusterAddrs is required.
	Addr string
	// SentinelAddrs are the host:port of Sentinels watching the primary
	// MasterName: the Backend asks them for the current primary, and
	// follows a promotion. See doc.go for what a promotion can lose, and
	// WaitReplicas.
	SentinelAddrs []string
	// MasterName is the name the Sentinels monitor. Required with
	// SentinelAddrs.
	MasterName string
	// SentinelUsername and SentinelPassword authenticate with the
	// Sentinels (not the data servers). Empty means no authentication.
	SentinelUsername string
	SentinelPassword string
	// ClusterAddrs are host:port of some nodes of a Redis Cluster (the
	// client learns the others). Every key of the election is in one hash
	// slot, so one shard (its primary) serves the election.
	ClusterAddrs []string
	// Username and Password authenticate with an ACL user (Redis 6 and
	// later); Password alone authenticates as the default user
	// (requirepass). Empty means no authentication.
	Username string
	Password string
	// TLS, if not nil, is used to connect with TLS. Its ServerName
	// defaults to Addr's host (set it for Sentinel and Cluster).
	TLS *tls.Config
	// WaitReplicas, if positive, makes every write (acquire, renew,
	// release, each claim and finish batch) wait until that many
	// replicas acknowledged it (WAIT on the same connection), for at most
	// WaitTimeout; fewer acknowledgements fail the operation: no lease,
	// no renewal, no claim. A promotion then cannot lose an acknowledged
	// write, but there is no leader while too few replicas answer. See
	// doc.go. Zero (the default) does not wait: Redis replicates
	// asynchronously.
	WaitReplicas int
	// WaitTimeout bounds each WAIT. Zero means min(TTL/4, 500ms); at
	// least 1ms, at most TTL/2.
	WaitTimeout time.Duration
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
	// Dialer, if not nil, opens the connections to the data servers
	// (e.g. through a tunnel, or a test's fault proxy); nil means TCP.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
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
	if c.WaitTimeout == 0 {
		c.WaitTimeout = min(c.Timing.TTL/4, 500*time.Millisecond)
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
	errs = append(errs, c.modeProblems()...)
	if !electionName.MatchString(c.Election) {
		errs = append(errs, fmt.Errorf("Election %q: must be 1 to 200 of A-Z a-z 0-9 . _ : / - (keys are baton:{Election}:...)", c.Election))
	}
	if c.MaxBatch < 1 || c.MaxBatch > MaxMaxBatch {
		errs = append(errs, fmt.Errorf("MaxBatch %d: must be between 1 and %d", c.MaxBatch, MaxMaxBatch))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("DialTimeout %v: must not be negative", c.DialTimeout))
	}
	if c.WaitReplicas < 0 {
		errs = append(errs, fmt.Errorf("WaitReplicas %d: must not be negative", c.WaitReplicas))
	}
	if c.WaitTimeout < time.Millisecond || c.WaitTimeout > c.Timing.TTL/2 || c.WaitTimeout%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("WaitTimeout %v: must be whole milliseconds, from 1ms to TTL/2 (%v)", c.WaitTimeout, c.Timing.TTL/2))
	}
	if c.Password == "" && c.Username != "" {
		errs = append(errs, fmt.Errorf("Password %q: required with Username %q", "", c.Username))
	}
	return c, driver.InvalidConfig("redis", errs)
}

// modeProblems checks that exactly one of Addr, SentinelAddrs and
// ClusterAddrs is given, and their addresses.
func (c Config) modeProblems() []error {
	var errs []error
	n := 0
	for _, set := range []bool{c.Addr != "", len(c.SentinelAddrs) > 0, len(c.ClusterAddrs) > 0} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		errs = append(errs, fmt.Errorf("Addr %q: required (host:port), unless SentinelAddrs or ClusterAddrs is given", c.Addr))
	case n > 1:
		errs = append(errs, fmt.Errorf("Addr %q, SentinelAddrs %q, ClusterAddrs %q: give exactly one", c.Addr, c.SentinelAddrs, c.ClusterAddrs))
	}
	if c.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Addr); err != nil {
			errs = append(errs, fmt.Errorf("Addr %q: want host:port", c.Addr))
		}
	}
	for _, f := range []struct {
		name  string
		addrs []string
	}{{"SentinelAddrs", c.SentinelAddrs}, {"ClusterAddrs", c.ClusterAddrs}} {
		for _, a := range f.addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				errs = append(errs, fmt.Errorf("%s %q: %q is not host:port", f.name, f.addrs, a))
			}
		}
	}
	if len(c.SentinelAddrs) > 0 && c.MasterName == "" {
		errs = append(errs, fmt.Errorf("MasterName %q: required with SentinelAddrs %q", c.MasterName, c.SentinelAddrs))
	}
	if len(c.SentinelAddrs) == 0 && c.MasterName != "" {
		errs = append(errs, fmt.Errorf("MasterName %q: only with SentinelAddrs", c.MasterName))
	}
	return errs
}
