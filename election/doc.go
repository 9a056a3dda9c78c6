// Package election is baton's backend-neutral leader election.
//
// A Backend (etcd, Consul, a SQL heartbeat row, or the in-memory store in
// electiontest) hands out Leases. A Lease is one term: it carries a
// fencing token greater than every earlier term's, and its Done channel
// closes when the term ends, at the latest at the local safe deadline
// (last renewal sent + TTL - SafetyMargin, on the monotonic clock), before
// the backend could give the election to anyone else.
//
// An Elector campaigns in a loop and calls a lead function for each term
// won, with a term context that ends with a cause: ErrSteppingDown when the
// elector is asked to stop while the lease is still held (drain, then
// return), or an error wrapping ErrLeadershipLost when the lease is gone
// (stop at once). LeaseContext gives the context that ends only on loss,
// TokenFromContext the fencing token, CheckTerm a non-blocking check to run
// before starting anything only the leader may start.
//
// Optional capabilities are separate interfaces found by type assertion:
// LeaderReader (who leads now) and Deadliner (a lease's local deadline).
//
// Backends build their leases with ManagedLease, which owns the renew loop
// and the self-fencing deadline, so every backend applies the same rules.
package election
