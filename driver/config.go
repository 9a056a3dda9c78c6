package driver

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton/election"
)

// BackendLimits describe, for one backend, the fields that every backend's
// Config has whatever its store: a client, Timing, History and Logger.
// A backend keeps one BackendLimits value and calls Defaults from its
// Config's defaults and Problems from its Validate, so that every backend
// applies the same defaults and reports the same problems in the same
// words. The zero value imposes nothing and defaults nothing.
type BackendLimits struct {
	// Client is the name of the Config's client field, used in the
	// problem a missing client reports ("Client <nil>: required").
	Client string
	// DefaultTTL replaces a zero election.Timing.TTL.
	DefaultTTL time.Duration
	// MinTTL is the shortest TTL the store accepts.
	MinTTL time.Duration
	// MaxTTL, if positive, is the longest TTL the store accepts.
	MaxTTL time.Duration
	// TTLUnit, if positive, is the unit the TTL must be a whole multiple
	// of (etcd grants leases in whole seconds).
	TTLUnit time.Duration
	// DefaultHistory replaces a zero History: how many runs per job the
	// backend's ledger keeps (ledger.DefaultHistory).
	DefaultHistory int
}

// Defaults returns t, history and logger with their zero values replaced:
// t by t.WithDefaults(l.DefaultTTL), history by l.DefaultHistory, logger
// by slog.Default(). It does not block.
func (l BackendLimits) Defaults(t election.Timing, history int, logger *slog.Logger) (election.Timing, int, *slog.Logger) {
	t = t.WithDefaults(l.DefaultTTL)
	if history == 0 {
		history = l.DefaultHistory
	}
	if logger == nil {
		logger = slog.Default()
	}
	return t, history, logger
}

// Problems returns every problem with the common fields of a Config whose
// defaults are applied, each naming its field and value: a missing client
// (hasClient false), the timing (Timing.Validate with MinTTL and
// TTLUnit, and a TTL above MaxTTL) and a negative history. It returns nil when
// there is none. A backend appends its own problems and joins them.
func (l BackendLimits) Problems(hasClient bool, t election.Timing, history int) []error {
	var errs []error
	if !hasClient {
		errs = append(errs, fmt.Errorf("%s <nil>: required", l.Client))
	}
	if err := t.Validate(l.MinTTL, l.TTLUnit); err != nil {
		errs = append(errs, err)
	}
	if l.MaxTTL > 0 && t.TTL > l.MaxTTL {
		errs = append(errs, fmt.Errorf("TTL %v: above the server maximum %v", t.TTL, l.MaxTTL))
	}
	if history < 0 {
		errs = append(errs, fmt.Errorf("History %d: must be positive", history))
	}
	return errs
}

// InvalidConfig joins the problems a Validate found into one error,
// "PKG: invalid config: " followed by each problem, or returns nil when
// errs holds none (nil entries are dropped).
func InvalidConfig(pkg string, errs []error) error {
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: invalid config: %w", pkg, err)
	}
	return nil
}
