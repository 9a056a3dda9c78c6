package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/ledger"
)

// Retries: the attempts of one run (pipeline.go, retryStep).
//
// A run is one tick and one claim. With Job.Retries, an attempt that
// failed (returned an error or panicked, its context still open) is
// followed by another, after a backoff, up to Retries more, all under
// the same claim and the same history entry; the entry records the last
// attempt's Result and Error and the number of attempts. Before each
// attempt the term is checked (Term.Check), as before the first. The
// backoff ends at once when the term ends (loss) or starts stopping
// (shutdown): then no attempt follows, here or on the next leader, and
// the run's error says so (retryCut). A timed-out attempt is not
// retried, nor one whose error wraps ErrFinal. While it waits, the run
// is still in flight: it counts for the job's overlap policy and the
// drain, not in Host.Running.

// ErrFinal marks a failure that a retry cannot mend (an HTTP job's 409,
// say). A job returns an error that wraps it (errors.Is) to end its run
// as failed at once, whatever its Retries.
var ErrFinal = errors.New("final: not retried")

// Retry defaults and bounds.
const (
	DefaultRetryBackoff    = time.Second
	DefaultRetryBackoffMax = time.Minute
	MaxRetries             = 100
)

// RetryObserver is an Observer that is also told about retries. A Host
// calls RunRetried, if its Observer implements it, right before each
// attempt after the first; attempt counts from 1.
type RetryObserver interface {
	RunRetried(job string, attempt int)
}

type attemptKey struct{}

// ContextWithAttempt returns a context carrying attempt (from 1), for
// testing job code outside a Host.
func ContextWithAttempt(ctx context.Context, attempt int) context.Context {
	return context.WithValue(ctx, attemptKey{}, attempt)
}

// AttemptFromContext returns which attempt of its run a job's context
// belongs to: 1 for the first, 2 for the first retry (Job.Retries); 0
// if ctx is not a run's context.
func AttemptFromContext(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// backoffs returns j's first wait and its cap, defaults applied.
func (j *Job) backoffs() (first, most time.Duration) {
	first, most = j.RetryBackoff, j.RetryBackoffMax
	if first == 0 {
		first = DefaultRetryBackoff
	}
	if most == 0 {
		most = max(DefaultRetryBackoffMax, first)
	}
	return first, most
}

// retryWait is the wait after failed attempt k (from 1):
// RetryBackoff·2^(k-1), at most RetryBackoffMax.
func (j *Job) retryWait(k int) time.Duration {
	first, most := j.backoffs()
	d := first
	for i := 1; i < k && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// validateRetries adds to Validate's errors those of j's retry fields.
func validateRetries(where string, j Job, add func(format string, args ...any)) {
	if j.Retries < 0 || j.Retries > MaxRetries {
		add("%s: Retries %d: want 0 to %d", where, j.Retries, MaxRetries)
	}
	if j.RetryBackoff < 0 {
		add("%s: RetryBackoff %v: must not be negative", where, j.RetryBackoff)
	}
	if j.RetryBackoffMax < 0 {
		add("%s: RetryBackoffMax %v: must not be negative", where, j.RetryBackoffMax)
	}
	if first, most := j.backoffs(); j.RetryBackoff > 0 && j.RetryBackoffMax > 0 && first > most {
		add("%s: RetryBackoff %v: more than RetryBackoffMax %v", where, j.RetryBackoff, j.RetryBackoffMax)
	}
}

// retryStep calls the rest of the pipeline once per attempt: again after
// an attempt that failed, while the job has retries left, after its
// backoff, if the term holds and is not stopping.
func retryStep(next runFunc) runFunc {
	return func(r *tickRun) {
		t, h, j := r.t, r.t.h, r.job
		for {
			next(r)
			if r.result != ledger.ResultFailed {
				return // ok, timed out, or cancelled: no retry
			}
			attempt := int(r.attempt.Load())
			if errors.Is(r.err, ErrFinal) {
				if j.Retries > 0 {
					h.log.Warn("attempt failed: final, not retried", "job", j.Name, "tick", r.tick.Time, "token", t.token, "attempt", attempt, "err", r.err)
				}
				return
			}
			if attempt > j.Retries {
				if j.Retries > 0 {
					h.log.Warn("attempt failed: no retries left", "job", j.Name, "tick", r.tick.Time, "token", t.token, "attempt", attempt, "err", r.err)
				}
				return
			}
			wait := j.retryWait(attempt)
			h.log.Warn("attempt failed: retrying", "job", j.Name, "tick", r.tick.Time, "token", t.token, "attempt", attempt, "retry_in", wait, "err", r.err)
			err := t.sleep(wait)
			if err == nil {
				err = t.check()
			}
			if err != nil {
				r.retryCut(attempt+1, err)
				return
			}
			why := r.pausedNow()
			// The read is a round trip: the term may have ended meanwhile.
			if err := t.check(); err != nil {
				r.retryCut(attempt+1, err)
				return
			}
			if why != "" {
				h.log.Info("retry not started: job paused", "job", j.Name, "tick", r.tick.Time, "token", t.token, "attempt", attempt+1, "why", why)
				r.err = fmt.Errorf("%w (not retried: %s)", r.err, why)
				return
			}
			r.attempt.Add(1)
			if o, ok := h.cfg.Observer.(RetryObserver); ok {
				o.RunRetried(j.Name, attempt+1)
			}
		}
	}
}

// retryCut records that r's attempt (from 1) was not started because
// its term is over (err says how): r's error then contains
// audit.ErrTextRetryCut, by which the accounting calls the tick lost
// (retry-cut, or not-delivered if the failed attempt never reached its
// application), not a tick that ran and failed.
func (r *tickRun) retryCut(attempt int, err error) {
	t := r.t
	t.h.log.Warn("retry not started: term over", "job", r.job.Name, "tick", r.tick.Time, "token", t.token, "attempt", attempt, "err", err)
	r.err = fmt.Errorf("%w %s: %v)", r.err, audit.ErrTextRetryCut, err)
}

var errStopping = errors.New("term stopping")

// sleep waits d, or until the term's runs are cancelled (a loss) or the
// term starts stopping (the end of Lead's context, or lose): then it
// returns why.
func (t *termRun) sleep(d time.Duration) error {
	if d > 0 {
		timer := t.h.clock.newTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-t.base.Done():
		case <-t.loopCtx.Done():
		}
	}
	switch {
	case t.base.Err() != nil:
		return context.Cause(t.base)
	case t.loopCtx.Err() != nil:
		return fmt.Errorf("term stopping: %w", context.Cause(t.loopCtx))
	case t.stopping.Load():
		return errStopping
	}
	return nil
}
