package sql

import (
	dbsql "database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Defaults.
const (
	// DefaultTTL is the lease TTL when Config.Timing.TTL is zero.
	DefaultTTL = 5 * time.Second
	// MinTTL is the smallest TTL accepted.
	MinTTL = time.Second
	// DefaultPollInterval is the pause between a follower's reads of the
	// lease row when Config.PollInterval is zero.
	DefaultPollInterval = time.Second
)

// limits are the SQL backend's bounds and defaults for the fields every
// backend's Config has; its client is the DB pool.
var limits = driver.BackendLimits{
	Client:         "DB",
	DefaultTTL:     DefaultTTL,
	MinTTL:         MinTTL,
	DefaultHistory: ledger.DefaultHistory,
}

// Config holds the settings both dialects share. mysql.Config is this
// type; postgres.Config has the same fields and Listen. Zero values mean
// the documented defaults; New copies it and never mutates the caller's
// value.
type Config struct {
	// DB is the connection pool every statement goes through. Required.
	// Give its connections timeouts (pgx: connect_timeout; go-sql-driver/
	// mysql: timeout, readTimeout, writeTimeout), so that a dead network
	// fails a statement instead of hanging it past its context.
	DB *dbsql.DB
	// Table is the lease table, a lowercase SQL identifier, optionally
	// qualified by a schema (PostgreSQL) or database (MySQL) name:
	// "baton_lease" or "ops.baton_lease". The ledger uses Table+"_ticks"
	// and Table+"_runs", PostgreSQL the sequence Table+"_token_seq",
	// MySQL the counter table Table+"_seq". Required.
	Table string
	// Election names the election: its primary key in Table. Several
	// elections may share one table. Required; at most 255 characters.
	Election string
	// Timing is the lease timing. Zero fields mean the election.Timing
	// defaults with a TTL of DefaultTTL. The TTL is at least MinTTL;
	// database timestamps have microsecond precision, so any TTL above the
	// minimum works.
	Timing election.Timing
	// PollInterval is the pause between a waiting candidate's reads of the
	// lease row. A waiting candidate wakes earlier when the row's expiry
	// (by the database clock) is nearer, or, on PostgreSQL with Listen
	// set, when the holder releases. Zero means DefaultPollInterval.
	PollInterval time.Duration
	// QueryTimeout bounds every statement a waiting candidate, Leader,
	// Check and the Ledger send. (Renewals are bounded by the lease's local
	// deadline instead.) Zero means the TTL.
	QueryTimeout time.Duration
	// History is how many runs per job the Ledger keeps. Zero means
	// ledger.DefaultHistory.
	History int
	// Logger receives transitions (Info) and retried errors (Warn). Nil
	// means slog.Default().
	Logger *slog.Logger

	// wallNow is the application wall clock, used only for informational
	// fields (Identity.Started when zero, Claim.Started when zero). Tests
	// skew it; nil means time.Now. No expiry decision ever reads it.
	wallNow func() time.Time
}

// withDefaults returns c with every zero field that has a default set to
// it.
func (c Config) withDefaults() Config {
	c.Timing, c.History, c.Logger = limits.Defaults(c.Timing, c.History, c.Logger)
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = c.Timing.TTL
	}
	if c.wallNow == nil {
		c.wallNow = time.Now
	}
	return c
}

// identPart is one unquoted identifier part. Lowercase only, so that
// PostgreSQL's case folding and MySQL's case-sensitive table names agree;
// 48 characters at most, so that the derived names (longest suffix
// "_token_seq") stay within PostgreSQL's 63-byte limit.
var identPart = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// validTable reports whether t is one or two identifier parts.
func validTable(t string) bool {
	for i := 0; i < len(t); i++ {
		if t[i] == '.' {
			return identPart.MatchString(t[:i]) && identPart.MatchString(t[i+1:])
		}
	}
	return identPart.MatchString(t)
}

// MaxNameLen is the longest Election name and job name, in characters.
const MaxNameLen = 255

// Validate reports every problem with c at once, after defaults are
// applied (a zero duration is valid, a negative one is not). Each problem
// names the field and its value. It does no I/O.
func (c Config) Validate() error {
	return driver.InvalidConfig("sql", c.problems())
}

// problems returns every problem with c after defaults are applied, the
// common fields first (see driver.BackendLimits), then the SQL ones.
func (c Config) problems() []error {
	c = c.withDefaults()
	errs := limits.Problems(c.DB != nil, c.Timing, c.History)
	switch {
	case c.Table == "":
		errs = append(errs, errors.New("Table: required"))
	case !validTable(c.Table):
		errs = append(errs, fmt.Errorf("Table %q: not a safe SQL identifier (want [schema.]name, each part [a-z_][a-z0-9_]*, at most 48 characters)", c.Table))
	}
	switch n := len([]rune(c.Election)); {
	case c.Election == "":
		errs = append(errs, errors.New("Election: required"))
	case n > MaxNameLen:
		errs = append(errs, fmt.Errorf("Election %q: %d characters, at most %d", c.Election, n, MaxNameLen))
	}
	if c.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("PollInterval %v: must be positive", c.PollInterval))
	}
	if c.QueryTimeout < 0 {
		errs = append(errs, fmt.Errorf("QueryTimeout %v: must be positive", c.QueryTimeout))
	}
	return errs
}
