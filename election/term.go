package election

import (
	"context"
	"errors"
	"time"
)

// Term is one term of leadership as the lead function sees it. The Elector
// makes one per term won and passes it to the lead function; NewTerm makes
// one outside an Elector. Its methods are safe for concurrent use and do
// not block.
type Term interface {
	// Token is the term's fencing token.
	Token() uint64
	// Check returns nil while the term holds: its lease is held, its local
	// safe deadline has not passed, and Lose was not called. Otherwise it
	// returns why not (an error wrapping ErrLeadershipLost, or
	// ErrReleased). Call it right before starting anything only the
	// leader may start.
	Check() error
	// Context ends when the term is over: on loss, at the local safe
	// deadline, on Lose, or when the lease is released after the lead
	// function returned. It does not end on a graceful step-down, so work
	// that drains after a stop runs under it. Its cause on loss wraps
	// ErrLeadershipLost. It carries the token (TokenFromContext).
	Context() context.Context
	// Lose ends the term at once: the lease is ended locally (if it
	// implements Loser) and Context ends with cause LostError(err). Call
	// it when the lead function learns from elsewhere that the term is
	// stale, for example from a ledger that refused a claim. Later calls
	// do nothing.
	Lose(err error)
}

type tokenKey struct{}

// TokenFromContext returns the fencing token carried by ctx: that of the
// term whose Context ctx derives from (an Elector's, or one of NewTerm).
// ok is false when ctx carries none. Jobs read it here; code that runs a
// job outside an Elector passes it a context derived from
// NewTerm(ctx, token).Context().
func TokenFromContext(ctx context.Context) (token uint64, ok bool) {
	token, ok = ctx.Value(tokenKey{}).(uint64)
	return token, ok
}

// withToken returns a context that carries token as its fencing token.
func withToken(ctx context.Context, token uint64) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

type electionKey struct{}

// ElectionFromContext returns the name of the election whose term ctx
// derives from: an Elector's Config.Election, or the name given to
// ContextWithElection. ok is false when ctx carries none (an Elector
// without a name, NewTerm). Tokens count per election: a fence compares
// a token only with tokens of the same election.
func ElectionFromContext(ctx context.Context) (name string, ok bool) {
	name, _ = ctx.Value(electionKey{}).(string)
	return name, name != ""
}

// ContextWithElection returns a context that carries name as its
// election's name, for code that runs a job outside an Elector.
func ContextWithElection(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, electionKey{}, name)
}

type leaseKey struct{}

// withLease returns a context that carries the term's lease, for GoneBy.
func withLease(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// LeaseDone returns a channel closed when the lease of the term ctx
// derives from ends (lost or released), or nil when ctx carries no lease
// (NewTerm). Code that stops a process gracefully while the term holds
// watches it, and asks GoneBy again when it closes.
func LeaseDone(ctx context.Context) <-chan struct{} {
	if l, ok := ctx.Value(leaseKey{}).(Lease); ok {
		return l.Done()
	}
	return nil
}

// SetNote sets the note of the lease of the term ctx derives from
// (Noter), and reports whether that lease keeps one.
func SetNote(ctx context.Context, note string) bool {
	if n, ok := ctx.Value(leaseKey{}).(Noter); ok {
		n.SetNote(note)
		return true
	}
	return false
}

// LocalDeadline returns the local safe deadline of the term ctx derives
// from, as its lease knows it now (Deadliner), and false when ctx carries
// no lease or the lease cannot tell. A renewal moves it later. A read on
// the term's behalf that should not outlast the term bounds itself by it:
// a client that does not give up on a cancelled context (go-redis) still
// gives up at a deadline.
func LocalDeadline(ctx context.Context) (time.Time, bool) {
	if d, ok := ctx.Value(leaseKey{}).(Deadliner); ok {
		return d.Deadline(), true
	}
	return time.Time{}, false
}

// GoneBy tells how to stop what a term started once ctx, derived from the
// term's Context, has ended. lost is true when the term was lost: ctx's
// cause wraps ErrLeadershipLost, or the term's lease ended with a loss.
// Then goneBy is the instant by which the term's processes must be gone,
// before the backend could give the lease to another candidate: the
// lease's GoneBy after a local deadline, or now when the backend ended
// the lease, the term was lost by Lose, or the lease cannot tell. lost is
// false when ctx is live or ended otherwise (a step-down, a shutdown
// timeout, a job's timeout): the lease is still held, and a graceful
// stop's kill grace applies.
func GoneBy(ctx context.Context) (goneBy time.Time, lost bool) {
	l, _ := ctx.Value(leaseKey{}).(Lease)
	var leaseErr error
	if l != nil {
		leaseErr = l.Err()
	}
	leaseLost := errors.Is(leaseErr, ErrLeadershipLost)
	cause := context.Cause(ctx)
	if ctx.Err() != nil && errors.Is(cause, ErrLeadershipLost) && (!leaseLost || !errors.Is(cause, leaseErr)) {
		// Lost for a reason of its own (a ledger refused a stale claim):
		// another term may hold the lease already.
		return time.Now(), true
	}
	if !leaseLost {
		return time.Time{}, false
	}
	if g, ok := l.(GoneByer); ok {
		return g.GoneBy(), true
	}
	return time.Now(), true
}

// NewTerm returns a term with token that holds as long as ctx is live and
// Lose is not called, with no lease behind it: for tests, and for code
// that leads outside an Elector. Its Context derives from ctx.
func NewTerm(ctx context.Context, token uint64) Term {
	c, cancel := context.WithCancelCause(withToken(ctx, token))
	return &term{token: token, ctx: c, cancel: cancel}
}

// term is the Term of an Elector (with a lease) or of NewTerm (without).
type term struct {
	token  uint64
	since  time.Time
	lease  Lease           // nil for NewTerm
	ctx    context.Context // ends on loss, deadline, Lose, release
	cancel context.CancelCauseFunc
}

func (t *term) Token() uint64            { return t.token }
func (t *term) Context() context.Context { return t.ctx }

func (t *term) Check() error {
	select {
	case <-t.ctx.Done():
		return context.Cause(t.ctx)
	default:
	}
	if t.lease == nil {
		return nil
	}
	select {
	case <-t.lease.Done():
		return t.lease.Err()
	default:
	}
	if d, ok := t.lease.(Deadliner); ok && !time.Now().Before(d.Deadline()) {
		return LostError(errDeadlinePassed)
	}
	return nil
}

func (t *term) Lose(err error) {
	if l, ok := t.lease.(Loser); ok {
		l.Lose(err)
	}
	t.cancel(LostError(err))
}
