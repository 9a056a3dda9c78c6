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

// The optional capabilities of a Lease that an Elector and a Term use,
// found by type assertion. A lease built on driver.ManagedLease has all
// three. Package driver names them for backend authors, beside the
// capabilities that only the front door uses (Checker, Ledgerer,
// Controller).
type (
	// Deadliner is a lease that knows the local safe deadline of its
	// term, so that a job start can re-check it without waiting for the
	// timer behind Done to fire. Term.Check and Deadline read it.
	Deadliner interface {
		// Deadline is the instant (with a monotonic reading) after which
		// the term must be treated as over unless a renewal sent later
		// succeeds.
		Deadline() time.Time
	}
	// GoneByer is a lease that knows, once the term is lost, the instant
	// by which whatever the term started must be gone: before the backend
	// could give the lease to another candidate. GoneBy reads it.
	GoneByer interface {
		// GoneBy is meaningful once Err wraps ErrLeadershipLost. It is
		// half the SafetyMargin after the local deadline when the term
		// ended there without a renewal (the backend keeps the lease a
		// whole SafetyMargin longer; the other half is kept for clock-rate
		// differences and the kill itself). It is the instant of the loss
		// when the backend reported the lease gone or Lose was called:
		// another candidate may hold it already.
		GoneBy() time.Time
	}
	// Loser is a lease that can be ended locally at once, before the
	// backend or the renew loop would notice. Term.Lose calls it.
	Loser interface {
		// Lose ends the term: Done closes and Err wraps ErrLeadershipLost
		// and reason. It does not block; later calls and calls after the
		// end do nothing.
		Lose(reason error)
	}
	// Noter is a lease that carries a short note from its holder to
	// every reader of the election (LeaderInfo.Note), on the one record
	// the holder can always write while it holds: its lease. A leader
	// whose other writes the backend refuses says so there. SetNote
	// calls it.
	Noter interface {
		// SetNote sets the note the lease shows from its next renewal
		// on; "" removes it. It does not block.
		SetNote(note string)
	}
)

// LeaderReader is the optional capability of a Backend that can tell who
// leads now, found by type assertion, so that followers can report it:
// an Elector's Leader calls it.
type LeaderReader interface {
	// Leader reads the current leader from the backend. It returns an
	// error wrapping ErrNoLeader when nobody holds the election.
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
	// Note is the leader's note (Noter), "" if none or the backend
	// keeps none.
	Note string `json:"note,omitempty"`
}
