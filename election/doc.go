// Package election is baton's backend-neutral leader election.
//
// A Backend (etcd, Consul, Redis, a SQL heartbeat row, or the in-memory
// store of backends/memory) hands out Leases. A Lease is one term: it carries a
// fencing token greater than every earlier term's, and its Done channel
// closes when the term ends, at the latest at the local safe deadline
// (last renewal sent + TTL - SafetyMargin, on the monotonic clock), before
// the backend could give the election to anyone else.
//
// An Elector campaigns in a loop and calls a lead function for each term
// won, with a term context and a Term. The term context ends with a cause:
// ErrSteppingDown when the elector is asked to stop while the lease is
// still held (drain, then return), or an error wrapping ErrLeadershipLost
// when the lease is gone (stop at once). The Term is the term as a value:
// Token is the fencing token, Check a non-blocking check to run before
// starting anything only the leader may start, Context a context that ends
// only on loss (work drains under it), and Lose ends the term at once when
// the lead function learns it is stale. Jobs read the token of their term
// with TokenFromContext.
//
// A backend reports each attempt it retries inside Acquire through the
// context (ReportAttempt); the Elector warns about a failure at once, then
// at most once a minute for the same error, tells its Observer of each,
// and AcquireFailing reports a candidate whose last attempts all failed,
// which cannot take part in the election.
//
// A Backend and its Lease are all an Elector needs. The optional
// capabilities it and a Term use (a lease's local deadline and the instant
// its processes must be gone by, a local end of the lease, who leads now)
// are declared here too, as interfaces found by type assertion:
// Deadliner, GoneByer, Loser, LeaderReader. The backend author's contract,
// which names these and adds the rest (a check of the store, the ledger,
// the control store) and ManagedLease, which every backend's lease is
// built on, is package driver. This package imports no other package of
// baton. Package backendtest holds the conformance suite every backend
// runs; backends/memory is the in-memory backend.
package election
