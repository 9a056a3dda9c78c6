package election

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
)

// A Backend retries inside Acquire: a store that refuses every attempt (a
// namespace that does not exist, an expired token, an address nothing
// answers on) would keep Acquire blocked without a word. So the caller of
// Acquire puts a reporter in its context, as net/http/httptrace does, and
// the backend reports through it how each attempt went.

type attemptKey struct{}

// WithAttemptReporter returns a context for Acquire under which the
// backend reports each attempt to report: a non-nil error for an attempt
// that failed (and is retried), nil for one the store answered (the
// candidate takes part in the election, and waits for the holder).
// report may be called from any goroutine, also concurrently; it must not
// block. An Elector puts its own reporter in the context of each Acquire.
func WithAttemptReporter(ctx context.Context, report func(err error)) context.Context {
	return context.WithValue(ctx, attemptKey{}, report)
}

// ReportAttempt tells the caller of Acquire, through the reporter in ctx
// (WithAttemptReporter), how one attempt inside Acquire went: err is the
// failure of an attempt Acquire retries, nil an attempt the store
// answered. Errors Acquire returns are not reported: the caller sees
// them. Without a reporter in ctx it does nothing. It does not block.
func ReportAttempt(ctx context.Context, err error) {
	if report, ok := ctx.Value(attemptKey{}).(func(error)); ok && report != nil {
		report(err)
	}
}

// reporter is what the backend reports an attempt of the Acquire under
// actx to: a failure is logged and counted, a good attempt ends a run of
// failures. What comes in once actx has ended (a request cut short by
// it) says nothing about the store.
func (e *Elector) reporter(actx context.Context) func(error) {
	return func(err error) {
		if actx.Err() != nil {
			return
		}
		if err != nil {
			e.attempts.failed(err)
			return
		}
		e.attempts.ok()
	}
}

// AcquireFailing returns an error, naming the last failure, while the
// last AcquireFailingAfter attempts to acquire all failed: the instance
// cannot take part in the election (a store it cannot reach, a namespace
// that does not exist, credentials refused). It returns nil once an
// attempt succeeds again, while leading, and while not campaigning. It
// does not block.
func (e *Elector) AcquireFailing() error {
	e.mu.Lock()
	campaigning := e.eligible && e.held == ""
	e.mu.Unlock()
	if !campaigning {
		return nil
	}
	return e.attempts.failing()
}

// AcquireFailingAfter is how many failed attempts in a row make
// AcquireFailing report an error (and a node not ready).
const AcquireFailingAfter = 3

// acquireWarnEvery is how often the same failure is warned about; the
// failures in between are logged at Debug, and counted.
var acquireWarnEvery = time.Minute

// attempts keeps the outcome of an Elector's campaign attempts: how many
// failed in a row, and when each distinct failure was last warned about.
type attempts struct {
	log      *slog.Logger
	observer Observer

	mu       sync.Mutex
	failures int       // in a row, since the last good attempt
	since    time.Time // of the first of them
	last     error
	warned   map[string]warning // by distinct error
}

type warning struct {
	at     time.Time
	hidden int // failures with this error since that warning
}

// failed records a failed attempt: counted by the Observer every time,
// warned about at once, then at most once per acquireWarnEvery for the
// same error.
func (a *attempts) failed(err error) {
	if a.observer != nil {
		a.observer.AcquireFailed(err)
	}
	now := time.Now()
	key := distinct(err)
	a.mu.Lock()
	a.failures++
	if a.failures == 1 {
		a.since = now
	}
	a.last = err
	n := a.failures
	if a.warned == nil {
		a.warned = map[string]warning{}
	}
	w, seen := a.warned[key]
	warn := !seen || now.Sub(w.at) >= acquireWarnEvery
	if warn {
		if len(a.warned) >= 64 { // errors that differ every time: keep it bounded
			clear(a.warned)
		}
		a.warned[key] = warning{at: now}
	} else {
		w.hidden++
		a.warned[key] = w
	}
	a.mu.Unlock()
	if warn {
		args := []any{"err", err, "failures_in_a_row", n}
		if w.hidden > 0 {
			args = append(args, "same_error_since_last_warning", w.hidden)
		}
		a.log.Warn("acquire attempt failed, retrying", args...)
		return
	}
	a.log.Debug("acquire attempt failed, retrying", "err", err, "failures_in_a_row", n)
}

// ok records a good attempt, or the lease won: it ends a run of failures.
func (a *attempts) ok() {
	a.mu.Lock()
	n, since := a.failures, a.since
	a.failures, a.last, a.since = 0, nil, time.Time{}
	clear(a.warned)
	a.mu.Unlock()
	if n > 0 {
		a.log.Info("acquire attempts answered again", "after_failures", n, "failing_for", time.Since(since).Round(time.Millisecond))
	}
}

// forget drops a run of failures without a word: the elector stopped
// campaigning (standby, a hold), so it no longer tells anything.
func (a *attempts) forget() {
	a.mu.Lock()
	a.failures, a.last, a.since = 0, nil, time.Time{}
	clear(a.warned)
	a.mu.Unlock()
}

// failing returns the error AcquireFailing reports, or nil.
func (a *attempts) failing() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failures < AcquireFailingAfter {
		return nil
	}
	return fmt.Errorf("acquire failing: %d attempts in a row over %v: %w",
		a.failures, time.Since(a.since).Round(time.Second), a.last)
}

// distinct is the key under which failures count as the same error: its
// text with every run of digits as one '#', so that a port, a resource
// version or a duration does not make each failure new.
func distinct(err error) string {
	var b strings.Builder
	digits := false
	for _, r := range err.Error() {
		if unicode.IsDigit(r) {
			if !digits {
				b.WriteByte('#')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	return b.String()
}
