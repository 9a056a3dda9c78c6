package kube

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Timing limits of Kubernetes leases.
const (
	// DefaultTTL is the lease TTL when Config.Timing.TTL is zero: the
	// Lease's leaseDurationSeconds.
	DefaultTTL = 15 * time.Second
	// MinTTL is the smallest TTL accepted: it must exceed twice
	// MinRenewInterval.
	MinTTL = 3 * time.Second
	// MinRenewInterval is the shortest RenewInterval accepted: client-go
	// candidates see a renewal only when renewTime's whole second
	// changes (doc.go).
	MinRenewInterval = time.Second
)

// limits are the Kubernetes bounds and defaults for the fields every
// backend's Config has. leaseDurationSeconds is whole seconds.
var limits = driver.BackendLimits{
	Client:         "Client",
	DefaultTTL:     DefaultTTL,
	MinTTL:         MinTTL,
	TTLUnit:        time.Second,
	DefaultHistory: ledger.DefaultHistory,
}

// objectName is what Config.Name may be: a DNS subdomain short enough
// that the backend's other objects (Name-terms) are names too.
var objectName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// Config configures a Backend. Zero values mean the documented defaults.
type Config struct {
	// Client reaches the API server. Required.
	Client *Client
	// Namespace holds the election's objects. Empty means "default".
	Namespace string
	// Name is the Lease's name, which client-go candidates of the same
	// election use too; the backend also keeps a ConfigMap named
	// Name-terms. Required: a DNS subdomain of at most 240 characters.
	Name string
	// Timing is the lease timing. TTL is the Lease's
	// leaseDurationSeconds: whole seconds, at least MinTTL; zero means
	// DefaultTTL. RenewInterval must be at least MinRenewInterval. See
	// election.Timing for the others, and doc.go for the clock-rate
	// assumption behind SafetyMargin.
	Timing election.Timing
	// History is how many runs per job a ledger keeps. Zero means
	// ledger.DefaultHistory.
	History int
	// Logger receives debug details and retry warnings. Nil means
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Timing, c.History, c.Logger = limits.Defaults(c.Timing, c.History, c.Logger)
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	return c
}

// Validate reports every problem with c at once, after defaults are
// applied. Each problem names the field and its value.
func (c Config) Validate() error {
	_, err := c.resolved()
	return err
}

func (c Config) resolved() (Config, error) {
	c = c.withDefaults()
	errs := limits.Problems(c.Client != nil, c.Timing, c.History)
	if c.Timing.RenewInterval < MinRenewInterval {
		errs = append(errs, fmt.Errorf("RenewInterval %v: below %v (client-go candidates see renewTime in whole seconds)", c.Timing.RenewInterval, MinRenewInterval))
	}
	if len(c.Name) > 240 || !objectName.MatchString(c.Name) {
		errs = append(errs, fmt.Errorf("Name %q: must be a DNS subdomain (a-z 0-9 - .) of at most 240 characters", c.Name))
	}
	if len(c.Namespace) > 63 || !objectName.MatchString(c.Namespace) || regexp.MustCompile(`\.`).MatchString(c.Namespace) {
		errs = append(errs, fmt.Errorf("Namespace %q: must be a DNS label (a-z 0-9 -) of at most 63 characters", c.Namespace))
	}
	return c, driver.InvalidConfig("kube", errs)
}
