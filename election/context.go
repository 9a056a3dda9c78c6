package election

import (
	"context"
	"time"
)

type termKey struct{}

// term is what a term context carries.
type term struct {
	token    uint64
	since    time.Time
	lease    Lease
	leaseCtx context.Context
}

// TokenFromContext returns the fencing token of the term that ctx belongs
// to. ok is false outside a term (ctx not derived from a term context).
func TokenFromContext(ctx context.Context) (token uint64, ok bool) {
	t, ok := ctx.Value(termKey{}).(*term)
	if !ok {
		return 0, false
	}
	return t.token, true
}

// ContextWithToken returns a context that carries token as its fencing
// token, for tests and for code that runs jobs outside an Elector. For
// CheckTerm and LeaseContext it is a term that lasts as long as ctx.
func ContextWithToken(ctx context.Context, token uint64) context.Context {
	t := &term{token: token}
	c := context.WithValue(ctx, termKey{}, t)
	t.leaseCtx = c
	return c
}

// LeaseContext returns the context of the lease behind the term context
// ctx. It ends only when the lease ends (loss, local deadline or release),
// not when the elector starts stepping down, so work that should drain
// after a graceful stop runs under it. Its cause on loss wraps
// ErrLeadershipLost. Outside a term it returns ctx.
func LeaseContext(ctx context.Context) context.Context {
	t, ok := ctx.Value(termKey{}).(*term)
	if !ok {
		return ctx
	}
	return t.leaseCtx
}

// CheckTerm returns nil if ctx belongs to a term whose lease is still held
// and whose local safe deadline has not passed. It does not block. Call it
// right before starting anything only the leader may start.
func CheckTerm(ctx context.Context) error {
	t, ok := ctx.Value(termKey{}).(*term)
	if !ok {
		return ErrNotLeader
	}
	select {
	case <-t.leaseCtx.Done():
		return context.Cause(t.leaseCtx)
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
