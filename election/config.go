package election

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config configures an Elector. Zero values mean the documented defaults.
type Config struct {
	// Backend is the leadership store. Required.
	Backend Backend
	// Identity names this candidate; Identity.ID is required and must be
	// unique per process. Host, PID and Started are filled in when zero.
	Identity Identity
	// Election names the election in logs. Optional.
	Election string
	// RetryPeriod is the pause after a failed Acquire, with up to 50%
	// jitter added. Zero means 1 s.
	RetryPeriod time.Duration
	// ReleaseTimeout bounds the release at the end of a term. Zero means
	// 5 s.
	ReleaseTimeout time.Duration
	// HoldCooldown is the cooldown of a term won while a Hold is in
	// effect (the campaign had succeeded when the hold began): the
	// Elector steps it down at once, before the lead function is called,
	// so that lead finds its context already ended (with a HoldError),
	// and does not campaign again for this long. Zero means no cooldown;
	// it must not be negative.
	HoldCooldown time.Duration
	// Logger receives transitions (Info) and failed attempts to acquire
	// (Warn at once, then at most once a minute for the same error; the
	// others at Debug). Nil means slog.Default().
	Logger *slog.Logger
	// Observer, if not nil, is told about transitions, for metrics.
	Observer Observer
}

// Observer is told about an Elector's transitions, synchronously on the
// goroutine that calls Run (AcquireFailed also on the backend's goroutines
// inside Acquire, maybe concurrently); its methods must not block.
type Observer interface {
	// AcquireFailed: an attempt to acquire failed, one the backend
	// reported and retried inside Acquire (ReportAttempt) or an error
	// Acquire returned other than cancellation. Every failure is told,
	// also those the log leaves out.
	AcquireFailed(err error)
	// Elected: a term with token began.
	Elected(token uint64)
	// TermEnded: the term with token ended after held; lost says whether
	// it was lost rather than released.
	TermEnded(token uint64, held time.Duration, lost bool)
}

// Defaults.
const (
	DefaultRetryPeriod    = time.Second
	DefaultReleaseTimeout = 5 * time.Second
)

func (c Config) withDefaults() Config {
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	if c.ReleaseTimeout == 0 {
		c.ReleaseTimeout = DefaultReleaseTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every problem with c at once, after defaults are
// applied (a zero duration is valid; a negative one is not).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Backend == nil {
		errs = append(errs, errors.New("Backend: required"))
	}
	if c.Identity.ID == "" {
		errs = append(errs, fmt.Errorf("Identity.ID %q: required, unique per process", c.Identity.ID))
	}
	if c.RetryPeriod < 0 {
		errs = append(errs, fmt.Errorf("RetryPeriod %v: must be positive", c.RetryPeriod))
	}
	if c.ReleaseTimeout < 0 {
		errs = append(errs, fmt.Errorf("ReleaseTimeout %v: must be positive", c.ReleaseTimeout))
	}
	if c.HoldCooldown < 0 {
		errs = append(errs, fmt.Errorf("HoldCooldown %v: must not be negative", c.HoldCooldown))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("election: invalid config: %w", err)
	}
	return nil
}
