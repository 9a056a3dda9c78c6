package driver

import (
	"context"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Backend and Lease are the contract every backend implements. Package
// election declares them, because an Elector's Config holds a Backend and
// a Term wraps a Lease; they are named here so that an author finds the
// whole contract in one package.
type (
	// Backend hands out the terms of one election: see election.Backend.
	Backend = election.Backend
	// Lease is one term: see election.Lease.
	Lease = election.Lease
	// Identity names one candidate.
	Identity = election.Identity
	// LeaderInfo is what a LeaderReader reports.
	LeaderInfo = election.LeaderInfo
	// Timing is the lease timing every backend's Config carries.
	Timing = election.Timing
)

// LostError wraps election.ErrLeadershipLost with the backend's reason:
// what a Lease's Err returns after a loss.
func LostError(reason error) error { return election.LostError(reason) }

// The optional capabilities of a Lease, found by type assertion. A lease
// built on ManagedLease has all three.
type (
	// Deadliner is a lease that knows the local safe deadline of its
	// term, so that a job start can re-check it without waiting for the
	// timer behind Done to fire.
	Deadliner interface {
		// Deadline is the instant (with a monotonic reading) after which
		// the term must be treated as over unless a renewal sent later
		// succeeds.
		Deadline() time.Time
	}
	// GoneByer is a lease that knows, once the term is lost, the instant
	// by which whatever the term started must be gone: before the backend
	// could give the lease to another candidate.
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
	// backend or the renew loop would notice. election.Term.Lose calls
	// it.
	Loser interface {
		// Lose ends the term: Done closes and Err wraps ErrLeadershipLost
		// and reason. It does not block; later calls and calls after the
		// end do nothing.
		Lose(reason error)
	}
)

// The optional capabilities of a Backend, found by type assertion.
type (
	// LeaderReader is a backend that can tell who leads now, so that
	// followers can report it.
	LeaderReader interface {
		// Leader reads the current leader from the backend. It returns an
		// error wrapping election.ErrNoLeader when nobody holds the
		// election.
		Leader(ctx context.Context) (LeaderInfo, error)
	}
	// Checker is a backend that can verify, without campaigning, that the
	// store is reachable with the credentials given and is set up
	// (schema, permissions), so that a node fails at start on a wrong
	// address, password, certificate or ACL token instead of retrying
	// forever.
	Checker interface {
		Check(ctx context.Context) error
	}
	// Ledgerer is a backend with a tick ledger, the store of claims that
	// makes each tick start at most once across terms and enables
	// catch-up and run history. baton.New finds it by this interface.
	Ledgerer interface {
		// Ledger returns the election's ledger. Its claims must be atomic
		// with a check, on the store, that the claiming term still holds.
		Ledger() ledger.Ledger
	}
	// Controller is a backend with a control store, which keeps the
	// operators' pauses and run-now requests, the registry of instances
	// and the terms. baton.New finds it by this interface; without one,
	// job control is off.
	Controller interface {
		// Control returns the election's control store.
		Control() control.Store
	}
)
