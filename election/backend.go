package election

import (
	"context"
	"time"
)

// Backend is the whole contract a leadership store implements. One Backend
// value serves one election (one etcd prefix, one Consul key, one SQL row);
// it may be shared by goroutines, but a process normally runs one candidate
// per election.
type Backend interface {
	// Acquire blocks until the caller leads the election or ctx is done, in
	// which case it returns an error wrapping ctx's error and holds nothing.
	//
	// The returned Lease outlives ctx: cancelling ctx after Acquire returned
	// does not end the term. Only loss, the lease's local deadline or
	// Release end it.
	Acquire(ctx context.Context, id Identity) (Lease, error)
}

// Lease is one term of leadership. Its methods are safe for concurrent use.
type Lease interface {
	// Done is closed exactly once, when the term ends: on loss (the backend
	// says so, or renewals stopped succeeding), at the local safe deadline
	// (last renewal sent + TTL - SafetyMargin on the monotonic clock), or on
	// Release.
	Done() <-chan struct{}
	// Err is nil while Done is open. Afterwards it wraps ErrLeadershipLost
	// (with the backend's reason) or is ErrReleased.
	Err() error
	// Token is the term's fencing token: strictly greater than the token of
	// every earlier term of this election, whatever happened in between.
	Token() uint64
	// Release ends the term and gives leadership up so that a waiting
	// candidate can take it at once. It is idempotent, safe after loss, and
	// bounded by ctx. When it returns, no goroutine of the lease is left.
	// It returns an error only if the backend could not be told; the term is
	// over locally either way.
	Release(ctx context.Context) error
}

// The optional capabilities a Backend or a Lease may have are named for
// backend authors in package driver (Deadliner, GoneByer, Loser,
// LeaderReader, Checker, Ledgerer, Controller). An Elector and a Term find
// the ones they use by type assertion, through these unexported mirrors.
type (
	deadliner    interface{ Deadline() time.Time }
	goneByer     interface{ GoneBy() time.Time }
	loser        interface{ Lose(reason error) }
	leaderReader interface {
		Leader(ctx context.Context) (LeaderInfo, error)
	}
)

// Identity names one candidate. ID must be unique per process (two
// processes with the same ID would look like one to an operator); Host and
// PID are informational and shown to operators.
type Identity struct {
	ID      string    `json:"id"`
	Host    string    `json:"host,omitempty"`
	PID     int       `json:"pid,omitempty"`
	Started time.Time `json:"started,omitzero"`
}

// LeaderInfo is what a LeaderReader reports about the current leader.
type LeaderInfo struct {
	Identity Identity  `json:"identity"`
	Token    uint64    `json:"token"`
	Since    time.Time `json:"since,omitzero"`
}
