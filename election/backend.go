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

// Deadliner is implemented by leases that know the local safe deadline of
// their term, so that a job start can re-check it without waiting for the
// timer behind Done to fire.
type Deadliner interface {
	// Deadline is the instant (with a monotonic reading) after which the
	// term must be treated as over unless a renewal sent later succeeds.
	Deadline() time.Time
}

// GoneByer is implemented by leases that know, once the term is lost, the
// instant by which whatever the term started must be gone: before the
// backend could give the lease to another candidate. GoneBy (and Term's
// GoneBy) read it.
type GoneByer interface {
	// GoneBy is meaningful once Err wraps ErrLeadershipLost. It is half
	// the SafetyMargin after the local deadline when the term ended there
	// without a renewal (the backend keeps the lease a whole SafetyMargin
	// longer; the other half is kept for clock-rate differences and the
	// kill itself). It is the instant of the loss when the backend
	// reported the lease gone or Lose was called: another candidate may
	// hold it already.
	GoneBy() time.Time
}

// Loser is implemented by leases that can be ended locally at once, before
// the backend or the renew loop would notice. Term.Lose calls it.
type Loser interface {
	// Lose ends the term: Done closes and Err wraps ErrLeadershipLost and
	// reason. It does not block; later calls and calls after the end do
	// nothing.
	Lose(reason error)
}

// LeaderReader is implemented by backends that can tell who leads now, so
// that followers can report it. It is found by type assertion.
type LeaderReader interface {
	// Leader reads the current leader from the backend. It returns an error
	// wrapping ErrNoLeader when nobody holds the election.
	Leader(ctx context.Context) (LeaderInfo, error)
}

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

// Checker is implemented by backends that can verify, without campaigning,
// that the store is reachable with the credentials given and is set up
// (schema, permissions). Call it at start to fail fast on a wrong address,
// password, certificate or ACL token instead of retrying forever. It is
// found by type assertion.
type Checker interface {
	Check(ctx context.Context) error
}
