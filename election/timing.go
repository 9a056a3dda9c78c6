package election

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Timing holds the lease timing shared by every backend. Backends embed it
// in their own Config, fill it with WithDefaults and check it with Validate.
//
// A term ends locally at lastRenewalSent + TTL - SafetyMargin, measured on
// the monotonic clock, whatever the backend has or has not said yet; the
// backend cannot give the lease to anyone before lastRenewalSent + TTL.
type Timing struct {
	// TTL is how long the backend keeps the lease after a renewal. Zero
	// means the backend's default (5 s on etcd and SQL, 10 s on Consul).
	TTL time.Duration
	// RenewInterval is the pause between renewals. Zero means TTL/3.
	RenewInterval time.Duration
	// SafetyMargin is taken off the TTL when computing the local deadline,
	// to absorb clock-rate differences and scheduling delay. Zero means
	// max(TTL/5, 500ms).
	SafetyMargin time.Duration
}

// WithDefaults returns t with zero fields replaced by defaults, using defTTL
// for a zero TTL.
func (t Timing) WithDefaults(defTTL time.Duration) Timing {
	if t.TTL == 0 {
		t.TTL = defTTL
	}
	if t.RenewInterval == 0 {
		t.RenewInterval = t.TTL / 3
	}
	if t.SafetyMargin == 0 {
		t.SafetyMargin = max(t.TTL/5, 500*time.Millisecond)
	}
	return t
}

// Validate reports every problem with t at once. minTTL is the backend's
// minimum TTL; granularity, if positive, is the unit the TTL must be a
// whole multiple of (etcd: whole seconds).
func (t Timing) Validate(minTTL, granularity time.Duration) error {
	var errs []error
	if t.TTL < minTTL {
		errs = append(errs, fmt.Errorf("TTL %v: below the backend minimum %v", t.TTL, minTTL))
	}
	if granularity > 0 && t.TTL%granularity != 0 {
		errs = append(errs, fmt.Errorf("TTL %v: must be a whole multiple of %v", t.TTL, granularity))
	}
	if t.RenewInterval <= 0 {
		errs = append(errs, fmt.Errorf("RenewInterval %v: must be positive", t.RenewInterval))
	}
	if t.SafetyMargin <= 0 {
		errs = append(errs, fmt.Errorf("SafetyMargin %v: must be positive", t.SafetyMargin))
	}
	// TTL - RenewInterval <= RenewInterval is TTL <= 2*RenewInterval
	// without its overflow (a RenewInterval above half the largest
	// Duration passed); TTL > RenewInterval > 0 keeps the subtraction in
	// range.
	if t.RenewInterval > 0 && (t.TTL <= t.RenewInterval || t.TTL-t.RenewInterval <= t.RenewInterval) {
		twice := fmt.Sprint(2 * t.RenewInterval)
		if t.RenewInterval > math.MaxInt64/2 {
			twice = "2 × " + t.RenewInterval.String()
		}
		errs = append(errs, fmt.Errorf("TTL %v: must be greater than 2*RenewInterval (%s)", t.TTL, twice))
	}
	if t.SafetyMargin > 0 && t.SafetyMargin >= t.TTL-t.RenewInterval {
		errs = append(errs, fmt.Errorf("SafetyMargin %v: must be less than TTL - RenewInterval (%v)", t.SafetyMargin, t.TTL-t.RenewInterval))
	}
	return errors.Join(errs...)
}
