package driver

import (
	"context"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Backend and Lease are the contract every backend implements, and
// Deadliner, GoneByer, Loser and LeaderReader the optional capabilities
// an Elector and a Term use. Package election declares them, because it
// is their consumer: an Elector's Config holds a Backend, a Term wraps a
// Lease and finds its capabilities by type assertion. They are named
// here so that an author finds the whole contract in one package.
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
	// term: see election.Deadliner.
	Deadliner = election.Deadliner
	// GoneByer is a lease that knows, once the term is lost, the instant
	// by which whatever the term started must be gone: see
	// election.GoneByer.
	GoneByer = election.GoneByer
	// Loser is a lease that can be ended locally at once: see
	// election.Loser.
	Loser = election.Loser
	// Noter is a lease that carries a note from its holder to every
	// reader of the election: see election.Noter.
	Noter = election.Noter
)

// The optional capabilities of a Backend, found by type assertion.
type (
	// LeaderReader is a backend that can tell who leads now, so that
	// followers can report it: see election.LeaderReader.
	LeaderReader = election.LeaderReader
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
	// Accounter is a backend that keeps the tick accounts (package
	// audit) in a store of their own rather than in its control store:
	// one whose control store is a single object of bounded size, which
	// the accounts would crowd out of room for pauses and requests.
	// baton.New finds it by this interface; without one, the accounts
	// live in the control store.
	Accounter interface {
		// AccountStore returns the store of the election's tick accounts.
		AccountStore() control.Store
	}
)
