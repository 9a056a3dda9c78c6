package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/election"
)

// ManagedLeaseConfig describes a backend lease to ManagedLease. Backends
// supply the three calls that talk to their store; ManagedLease owns the
// renew loop, the local safe deadline, Done and Err.
type ManagedLeaseConfig struct {
	// Timing must be validated and defaulted.
	Timing election.Timing
	// Sent is when the request that created the lease on the backend was
	// sent. The first local deadline is Sent + TTL - SafetyMargin.
	Sent time.Time
	// Renew sends one renewal and blocks until it is answered or ctx is
	// done. It returns the TTL the backend granted (zero means Timing.TTL),
	// or an error: one wrapping ErrLeadershipLost ends the term at once,
	// any other error is retried until the local deadline.
	Renew func(ctx context.Context) (time.Duration, error)
	// Watch, if not nil, blocks until the backend reports the lease gone
	// (it returns the reason, which ends the term) or ctx is done (it
	// returns ctx's error). A Watch that returns early with any other error
	// is restarted after a short pause.
	Watch func(ctx context.Context) error
	// Release gives the lease up on the backend. It is called at most once,
	// after the renew loop has stopped.
	Release func(ctx context.Context) error
	// Logger receives renewal warnings; nil means slog.Default().
	Logger *slog.Logger
}

// ManagedLease is a Lease (and Deadliner) built from a backend's renew,
// watch and release calls. Its renew loop starts with NewManagedLease; it
// ends with the term, and Release waits for it.
type ManagedLease struct {
	cfg    ManagedLeaseConfig
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	loop   chan struct{} // closed when every goroutine of the lease returned

	deadline atomic.Pointer[time.Time] // read on every job start: no lock

	mu     sync.Mutex
	token  uint64
	err    error
	goneBy time.Time // set with err

	releaseOnce sync.Once
	releaseErr  error
}

var (
	_ election.Lease = (*ManagedLease)(nil)
	_ Deadliner      = (*ManagedLease)(nil)
	_ GoneByer       = (*ManagedLease)(nil)
)

// NewManagedLease starts the renew loop (and the watch, if any) and returns
// the lease. The caller sets the token with SetToken before handing the
// lease out; if it gives the lease up before that, it calls Release.
func NewManagedLease(cfg ManagedLeaseConfig) *ManagedLease {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &ManagedLease{
		cfg:    cfg,
		log:    cfg.Logger,
		cancel: cancel,
		done:   make(chan struct{}),
		loop:   make(chan struct{}),
	}
	first := cfg.Sent.Add(cfg.Timing.TTL - cfg.Timing.SafetyMargin)
	l.deadline.Store(&first)
	go l.run(ctx)
	return l
}

// SetToken sets the term's fencing token. Call it before the lease is
// handed to anyone.
func (l *ManagedLease) SetToken(token uint64) {
	l.mu.Lock()
	l.token = token
	l.mu.Unlock()
}

// Token implements Lease.
func (l *ManagedLease) Token() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.token
}

// Done implements Lease.
func (l *ManagedLease) Done() <-chan struct{} { return l.done }

// Err implements Lease.
func (l *ManagedLease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Deadline implements Deadliner.
func (l *ManagedLease) Deadline() time.Time {
	return *l.deadline.Load()
}

// GoneBy implements GoneByer: after a loss at the local deadline, half
// the SafetyMargin after it; after any other loss, the instant of the loss.
func (l *ManagedLease) GoneBy() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.goneBy
}

// end closes Done with err unless it is closed already. The backend may
// give the lease to another candidate from now on.
func (l *ManagedLease) end(err error) {
	l.endGoneBy(err, time.Now())
}

// expire ends the term at its local deadline: the backend keeps the lease
// until a SafetyMargin after it, and the term's processes get half of it.
func (l *ManagedLease) expire() {
	goneBy := l.Deadline().Add(l.cfg.Timing.SafetyMargin / 2)
	l.endGoneBy(election.LostError(errors.New("local deadline passed without a successful renewal")), goneBy)
}

func (l *ManagedLease) endGoneBy(err error, goneBy time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err, l.goneBy = err, goneBy
	close(l.done)
}

// Lose ends the term with a loss caused by reason, as if the backend had
// reported it. Backends call it when they learn of the loss out of band.
func (l *ManagedLease) Lose(reason error) {
	l.end(election.LostError(reason))
}

// Release implements Lease: it ends the term locally, stops the renew loop,
// then gives the lease up on the backend. Later calls return the first
// call's result.
func (l *ManagedLease) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		l.end(election.ErrReleased)
		l.cancel()
		select {
		case <-l.loop:
		case <-ctx.Done():
			l.releaseErr = fmt.Errorf("release: renew loop still running: %w", context.Cause(ctx))
			return
		}
		if l.cfg.Release != nil {
			if err := l.cfg.Release(ctx); err != nil {
				l.releaseErr = fmt.Errorf("release: %w", err)
			}
		}
	})
	return l.releaseErr
}

type renewResult struct {
	sent time.Time
	ttl  time.Duration
	err  error
}

func (l *ManagedLease) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer close(l.loop)
	defer wg.Wait()
	defer l.cancel()

	t := l.cfg.Timing
	watchErr := make(chan error, 1)
	if l.cfg.Watch != nil {
		wg.Go(func() {
			for {
				err := l.cfg.Watch(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil && !errors.Is(err, ErrRetryWatch) {
					watchErr <- err
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}

	deadline := time.NewTimer(time.Until(l.Deadline()))
	defer deadline.Stop()
	// Renewals are timed from the send time of the request that set the
	// deadline, as the deadline is: one RenewInterval after it, or at once
	// if its answer came later than that. Timing them from the answer
	// instead let a slow answer (a partition that held the request, then
	// healed) put the next renewal within milliseconds of the deadline,
	// and the term ended for want of a renewal that was never late.
	next := time.NewTimer(time.Until(l.cfg.Sent.Add(t.RenewInterval)))
	defer next.Stop()
	results := make(chan renewResult, 1)
	inflight := false
	retry := max(min(t.RenewInterval/4, time.Second), 10*time.Millisecond)

	for {
		select {
		case <-ctx.Done():
			return
		case <-l.done:
			return
		case <-deadline.C:
			l.expire()
			return
		case err := <-watchErr:
			l.end(election.LostError(err))
			return
		case <-next.C:
			if inflight {
				next.Reset(retry)
				continue
			}
			inflight = true
			rctx, rcancel := context.WithDeadline(ctx, l.Deadline())
			sent := time.Now()
			wg.Go(func() {
				defer rcancel()
				ttl, err := l.cfg.Renew(rctx)
				results <- renewResult{sent: sent, ttl: ttl, err: err}
			})
		case r := <-results:
			inflight = false
			if r.err != nil {
				if errors.Is(r.err, election.ErrLeadershipLost) {
					l.end(r.err)
					return
				}
				if ctx.Err() != nil {
					return
				}
				if !time.Now().Before(l.Deadline()) {
					// The renewal ran out of time with the term: the
					// deadline case ends it, with the right reason.
					l.expire()
					return
				}
				l.log.Warn("lease renewal failed, retrying", "err", r.err)
				next.Reset(retry)
				continue
			}
			ttl := t.TTL
			if r.ttl > 0 && r.ttl < ttl {
				ttl = r.ttl
			}
			d := r.sent.Add(ttl - t.SafetyMargin)
			cur := l.Deadline()
			if d.After(cur) { // only the renew loop stores it
				l.deadline.Store(&d)
				cur = d
			}
			deadline.Reset(time.Until(cur))
			next.Reset(time.Until(r.sent.Add(t.RenewInterval))) // at once if that has passed
			l.log.Debug("lease renewed", "deadline_in", time.Until(cur).Round(time.Millisecond).String())
		}
	}
}
