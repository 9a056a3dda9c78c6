package election

import (
	"context"
	"time"
)

// Whether and when an Elector campaigns: the operator's StepDown (with
// its cooldown) and SetEligible, and the Hold of a gate such as the
// application check. Run waits in waitEligible until all of them allow a
// campaign.

// StepDown asks the current term, if any, to end gracefully (the term
// context ends with ErrSteppingDown, lead drains, the lease is released)
// and keeps this elector from campaigning again for cooldown. While a
// Hold is in effect the term context's cause is a HoldError with the
// hold's reason, which wraps ErrSteppingDown. It does not block. It
// reports whether a term was being held.
func (e *Elector) StepDown(cooldown time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cooldown = time.Now().Add(cooldown)
	// Wake a campaign loop waiting out an earlier cooldown, so the new one
	// (shorter or longer) takes effect at once.
	close(e.eligibleC)
	e.eligibleC = make(chan struct{})
	if e.stepDown == nil {
		return false
	}
	select {
	case <-e.stepDown:
	default:
		e.stepCause = ErrSteppingDown
		if e.held != "" {
			e.stepCause = &HoldError{Reason: e.held}
		}
		close(e.stepDown)
	}
	return true
}

// CooldownUntil returns when the cooldown of the last StepDown ends, or the
// zero time when no cooldown is in effect. It does not block.
func (e *Elector) CooldownUntil() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !time.Now().Before(e.cooldown) {
		return time.Time{}
	}
	return e.cooldown
}

// SetEligible lets this elector campaign (true, the default) or not
// (false). Making it ineligible stops a campaign in progress but does not
// end a term already held; use StepDown for that. It does not block.
func (e *Elector) SetEligible(ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.eligible == ok {
		return
	}
	e.eligible = ok
	close(e.eligibleC)
	e.eligibleC = make(chan struct{})
	if !ok && e.wake != nil {
		e.wake()
	}
}

// Hold keeps this elector from campaigning while reason is not "" (an
// application that does not answer, say), apart from the operator's
// SetEligible: both must allow a campaign. Hold("") lifts it. Like
// SetEligible(false), a hold stops a campaign in progress but does not
// end a term already held; a term won all the same while held (the
// campaign had succeeded when the hold began) is stepped down at once,
// with Config.HoldCooldown. A StepDown while held ends the term with a
// HoldError. It does not block.
func (e *Elector) Hold(reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if (e.held == "") == (reason == "") {
		e.held = reason
		return
	}
	e.held = reason
	close(e.eligibleC)
	e.eligibleC = make(chan struct{})
	if reason != "" && e.wake != nil {
		e.wake()
	}
}

// Held returns the reason of the hold in effect, "" if none.
func (e *Elector) Held() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.held
}

// Eligible reports whether the operator lets this elector campaign
// (SetEligible); a Hold is reported by Held.
func (e *Elector) Eligible() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.eligible
}

func (e *Elector) waitEligible(ctx context.Context) error {
	for {
		e.mu.Lock()
		ok, ch, until := e.eligible && e.held == "", e.eligibleC, e.cooldown
		e.mu.Unlock()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !ok {
			e.attempts.forget() // not campaigning: nothing to tell
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ch:
			}
			continue
		}
		if d := time.Until(until); d > 0 {
			e.log.Info("cooling down before campaigning", "for", d.Round(time.Millisecond))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			case <-ch:
			}
			continue
		}
		return nil
	}
}
