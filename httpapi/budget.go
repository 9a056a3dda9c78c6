package httpapi

import (
	"fmt"
	"strings"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// KillGraceMargin is added to the commands' kill grace for the Host's own
// wait after it cancels the runs still going at the shutdown timeout, so
// that a command killed at the end of its grace is seen to return.
const KillGraceMargin = time.Second

// HTTPShutdownTimeout bounds the graceful shutdown of a node's HTTP
// server, which the runner (package baton's RunServing) begins when the
// elector has released the lease.
const HTTPShutdownTimeout = 5 * time.Second

// ShutdownConfig holds the settings that bound a graceful stop of a node,
// from SIGTERM until package baton's Run returns. Zero means each one's
// default.
type ShutdownConfig struct {
	// ShutdownTimeout is how long the drain waits for runs in flight
	// (schedulerhost.Config.ShutdownTimeout). Zero means
	// schedulerhost.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL of a cancelled
	// command job. Zero means schedulerhost.DefaultKillGrace (5 s).
	KillGrace time.Duration
	// ReleaseTimeout bounds the release of the lease
	// (election.Config.ReleaseTimeout). Zero means
	// election.DefaultReleaseTimeout.
	ReleaseTimeout time.Duration
}

// WithDefaults returns c with each zero setting replaced by its default.
func (c ShutdownConfig) WithDefaults() ShutdownConfig {
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = schedulerhost.DefaultShutdownTimeout
	}
	if c.KillGrace <= 0 {
		c.KillGrace = schedulerhost.DefaultKillGrace
	}
	if c.ReleaseTimeout <= 0 {
		c.ReleaseTimeout = election.DefaultReleaseTimeout
	}
	return c
}

// BudgetPart is one step of a graceful stop and the longest it may take.
type BudgetPart struct {
	Name string // the setting or constant that bounds it
	Max  time.Duration
}

// Parts returns the steps of a graceful stop in the order they happen,
// with c's defaults applied: the drain waits for runs in flight, then
// cancels the rest and gives commands their kill grace (plus the Host's
// margin), then the lease is released, then the HTTP server shuts down.
func (c ShutdownConfig) Parts() []BudgetPart {
	c = c.WithDefaults()
	return []BudgetPart{
		{"shutdown_timeout", c.ShutdownTimeout},
		{"kill_grace", c.KillGrace},
		{"kill_grace_margin", KillGraceMargin},
		{"release_timeout", c.ReleaseTimeout},
		{"http_shutdown_timeout", HTTPShutdownTimeout},
	}
}

// ShutdownBudget returns the longest a graceful stop of a node configured
// with c can take: the sum of c.Parts(). A stop takes this long only when
// runs ignore their cancellation and the backend does not answer the
// release; usually it is over when the runs in flight have finished.
func ShutdownBudget(c ShutdownConfig) time.Duration {
	var sum time.Duration
	for _, p := range c.Parts() {
		sum += p.Max
	}
	return sum
}

// CheckGracePeriod reports whether a graceful stop of a node configured
// with c fits in grace, the time the process is given between SIGTERM and
// SIGKILL (Kubernetes' terminationGracePeriodSeconds; a preStop hook's
// time counts against it too). It returns nil when ShutdownBudget(c) is
// at most grace, else an error wrapping ErrGracePeriodTooShort that names
// each part and the sum.
func CheckGracePeriod(c ShutdownConfig, grace time.Duration) error {
	budget := ShutdownBudget(c)
	if budget <= grace {
		return nil
	}
	var parts []string
	for _, p := range c.Parts() {
		parts = append(parts, fmt.Sprintf("%s %v", p.Name, p.Max))
	}
	return fmt.Errorf("%w: the shutdown budget %v (%s) exceeds the grace period %v by %v",
		ErrGracePeriodTooShort, budget, strings.Join(parts, " + "), grace, budget-grace)
}
