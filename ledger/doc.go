// Package ledger is the contract between a scheduler host and the store
// that records which ticks were claimed, for the person who writes a
// backend's ledger. ledger.go holds the Ledger interface, the Claim a
// host makes before starting a tick and the Run entries of a job's
// history with their Result; errors.go the errors a call returns
// (ErrStaleTerm, ErrTickClaimed, and ErrRefused, which a backend sets
// with Refused where it is not authorised).
//
// A backend implements Ledger next to its election.Backend (the claim must
// be atomic with a check that the claiming term still holds), and runs the
// conformance suite of package backendtest against it. The scheduler
// (package schedulerhost) is the consumer: it imports this package, and
// this package imports only election.
package ledger
