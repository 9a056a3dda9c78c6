package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Elector campaigns for one election and runs a lead function for each
// term it wins. Create it with New; call Run once.
type Elector struct {
	cfg Config
	log *slog.Logger

	running  atomic.Bool
	attempts *attempts // how the campaign's attempts go

	mu        sync.Mutex
	cur       *term              // nil when not leading
	stepDown  chan struct{}      // closed by StepDown during the current term
	stepCause error              // the term context's cause once stepDown is closed: ErrSteppingDown, or a HoldError
	cooldown  time.Time          // no campaign before this instant
	eligible  bool               // false: do not campaign
	held      string             // not "": do not campaign, for this reason (Hold)
	eligibleC chan struct{}      // closed and replaced when eligibility changes
	wake      context.CancelFunc // cancels a running Acquire when eligibility drops
}

// TermInfo describes the term an Elector currently holds.
type TermInfo struct {
	Token uint64
	Since time.Time
	// SteppingDown is true once StepDown was called during this term: it
	// drains and then releases.
	SteppingDown bool
}

// New copies cfg, applies defaults, validates it and returns an Elector.
// It does not touch the backend.
func New(cfg Config) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Identity.Host == "" {
		cfg.Identity.Host, _ = os.Hostname()
	}
	if cfg.Identity.PID == 0 {
		cfg.Identity.PID = os.Getpid()
	}
	if cfg.Identity.Started.IsZero() {
		cfg.Identity.Started = time.Now().UTC().Truncate(time.Millisecond)
	}
	log := cfg.Logger.With("election", cfg.Election, "identity", cfg.Identity.ID)
	return &Elector{
		cfg:       cfg,
		log:       log,
		attempts:  &attempts{log: log, observer: cfg.Observer},
		eligible:  true,
		eligibleC: make(chan struct{}),
	}, nil
}

// Identity returns the candidate's identity as sent to the backend.
func (e *Elector) Identity() Identity { return e.cfg.Identity }

// Run campaigns, and for each term won calls lead with a term context and
// the Term on the calling goroutine, then releases the lease and campaigns again. It
// blocks until ctx is done and the current term, if any, has been released;
// then it returns nil. It returns early with an error only if lead returns
// an error while its term is still live (and after releasing that term),
// unless that error wraps ErrLeadershipLost: lead learned the term is
// stale, so the lease is released and the elector campaigns again.
//
// The term context passed to lead ends when the term ends, with a cause:
//   - wrapping ErrLeadershipLost when the lease was lost; it may already be
//     held by another candidate, so stop at once;
//   - ErrSteppingDown when ctx ended or StepDown was called; the lease is
//     still held and renewed until lead returns, so lead may drain its
//     work first, under term.Context(), which ends only on loss. When ctx
//     ended it is ErrShuttingDown; when the Elector was held (Hold) it is
//     a HoldError with the hold's reason; both wrap ErrSteppingDown. A
//     term won while held is stepped down before lead is called.
//
// A lead that learns from elsewhere that its term is stale calls
// term.Lose: the lease ends at once and both contexts end with a cause
// wrapping ErrLeadershipLost.
//
// The release uses a fresh context bounded by ReleaseTimeout. Run must be
// called at most once.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, term Term) error) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("election: Run called twice")
	}
	for {
		if err := e.waitEligible(ctx); err != nil {
			return nil
		}
		actx, cancel := context.WithCancel(ctx)
		e.mu.Lock()
		e.wake = cancel
		e.mu.Unlock()
		e.log.Debug("campaigning")
		lease, err := e.cfg.Backend.Acquire(WithAttemptReporter(actx, e.reporter(actx)), e.cfg.Identity)
		e.mu.Lock()
		e.wake = nil
		e.mu.Unlock()
		woken := actx.Err() != nil // before cancel, which ends actx in any case
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if woken { // eligibility dropped, or a hold began
				e.attempts.forget()
				continue
			}
			// An error Acquire returns is one more failed attempt,
			// logged and counted as those it retried itself.
			e.attempts.failed(err)
			wait := e.cfg.RetryPeriod + rand.N(e.cfg.RetryPeriod/2+1)
			e.log.Debug("retrying acquire", "retry_in", wait)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			continue
		}
		e.attempts.ok()
		if err := e.runTerm(ctx, lease, lead); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (e *Elector) runTerm(ctx context.Context, lease Lease, lead func(context.Context, Term) error) error {
	ctx = ContextWithElection(ctx, e.cfg.Election) // beside the token (ElectionFromContext)
	leaseCtx, cancelLease := context.WithCancelCause(withLease(withToken(context.WithoutCancel(ctx), lease.Token()), lease))
	t := &term{token: lease.Token(), since: time.Now(), lease: lease, ctx: leaseCtx, cancel: cancelLease}
	termCtx, cancelTerm := context.WithCancelCause(leaseCtx)
	stepDown := make(chan struct{})

	e.mu.Lock()
	e.cur = t
	e.stepDown = stepDown
	e.stepCause = nil
	held := e.held
	if held != "" { // won while a hold began: steps down before lead starts anything
		e.cooldown = time.Now().Add(e.cfg.HoldCooldown)
		e.stepCause = &HoldError{Reason: held}
		close(stepDown)
	}
	heldCause := e.stepCause
	e.mu.Unlock()

	log := e.log.With("token", t.token)
	log.Info("acquired leadership")
	if e.cfg.Observer != nil {
		e.cfg.Observer.Elected(t.token)
	}
	if held != "" {
		log.Warn("won a term while held: stepping down at once", "reason", held,
			"no_campaign_before", time.Now().Add(e.cfg.HoldCooldown).Format(time.RFC3339Nano))
		cancelTerm(heldCause)
	}

	finished := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		stopping := false
		for {
			var stopC <-chan struct{}
			var sdC <-chan struct{}
			if !stopping {
				stopC, sdC = ctx.Done(), stepDown
			}
			select {
			case <-lease.Done():
				cancelLease(lease.Err())
				return
			case <-stopC:
				stopping = true
				log.Info("stepping down", "reason", "shutdown")
				cancelTerm(ErrShuttingDown)
			case <-sdC:
				stopping = true
				e.mu.Lock()
				cause := e.stepCause
				e.mu.Unlock()
				if he, ok := errors.AsType[*HoldError](cause); ok {
					log.Info("stepping down", "reason", "step-down requested", "held", he.Reason)
				} else {
					log.Info("stepping down", "reason", "step-down requested")
				}
				cancelTerm(cause)
			case <-finished:
				return
			}
		}
	})

	leadErr := callLead(termCtx, t, lead)
	close(finished)
	wg.Wait()
	termLive := termCtx.Err() == nil

	e.mu.Lock()
	e.cur = nil
	e.stepDown = nil
	e.mu.Unlock()

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.ReleaseTimeout)
	relStart := time.Now()
	relErr := lease.Release(rctx)
	relTook := time.Since(relStart).Round(time.Millisecond)
	cancel()
	lost := lease.Err()
	cancelLease(lost)
	cancelTerm(lost)

	if e.cfg.Observer != nil {
		e.cfg.Observer.TermEnded(t.token, time.Since(t.since), errors.Is(lost, ErrLeadershipLost))
	}
	// term_length is the whole term; took is the release's own time.
	termLength := time.Since(t.since).Round(time.Millisecond)
	switch {
	case errors.Is(lost, ErrLeadershipLost):
		log.Warn("lost leadership", "err", lost, "term_length", termLength, "took", relTook)
	case relErr != nil:
		log.Warn("released leadership with error", "err", relErr, "term_length", termLength, "took", relTook)
	default:
		log.Info("released leadership", "term_length", termLength, "took", relTook)
	}
	if leadErr != nil && termLive && !errors.Is(leadErr, ErrLeadershipLost) {
		return fmt.Errorf("election: lead: %w", leadErr)
	}
	if leadErr != nil {
		log.Debug("lead returned after the term ended", "err", leadErr)
	}
	return nil
}

func callLead(ctx context.Context, t Term, lead func(context.Context, Term) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return lead(ctx, t)
}

// IsLeader reports whether this elector holds a live term right now: the
// lease is held and its local safe deadline has not passed. It does not
// block.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	t := e.cur
	e.mu.Unlock()
	if t == nil {
		return false
	}
	return t.Check() == nil
}

// Term returns the live term this elector holds, if any.
func (e *Elector) Term() (TermInfo, bool) {
	e.mu.Lock()
	t, sd := e.cur, e.stepDown
	e.mu.Unlock()
	if t == nil || t.Check() != nil {
		return TermInfo{}, false
	}
	steppingDown := false
	select {
	case <-sd:
		steppingDown = true
	default:
	}
	return TermInfo{Token: t.token, Since: t.since, SteppingDown: steppingDown}, true
}

// Leader reports who leads: this elector if it holds a live term, otherwise
// whatever the backend says if it implements LeaderReader. Without a
// LeaderReader it returns an error wrapping ErrNoLeader when not leading.
func (e *Elector) Leader(ctx context.Context) (LeaderInfo, error) {
	if ti, ok := e.Term(); ok {
		return LeaderInfo{Identity: e.cfg.Identity, Token: ti.Token, Since: ti.Since}, nil
	}
	if lr, ok := e.cfg.Backend.(LeaderReader); ok {
		return lr.Leader(ctx)
	}
	return LeaderInfo{}, fmt.Errorf("%w known: backend cannot report the leader", ErrNoLeader)
}
