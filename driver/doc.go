// Package driver is the backend author's contract, in one place: what a
// new baton backend implements and what it is built from, so that every
// backend applies the same lease rules. A person who embeds baton never
// needs it; package election keeps the embedder's names.
//
// The contract (contract.go):
//
//   - Backend and Lease, the one capability every backend has, with
//     Identity, LeaderInfo and Timing.
//   - The optional capabilities, each an interface found by type
//     assertion: of a Lease, Deadliner, GoneByer and Loser; of a Backend,
//     LeaderReader, Checker, Ledgerer (the tick ledger of package ledger)
//     and Controller (the control store of package control).
//
// The consumer of a contract declares it: package election declares
// Backend, Lease and the capabilities an Elector and a Term use
// (Deadliner, GoneByer, Loser, LeaderReader), and this package names them
// by alias; Checker, Ledgerer and Controller, which the front door
// (baton.New, and the node of cmd/baton) uses, are declared here. So
// election imports nothing of this module, and a backend author finds
// every interface to implement in this package.
//
// What a backend is built from:
//
//   - ManagedLease owns a lease's renew loop, its local safe deadline (last
//     successful renewal sent + TTL - SafetyMargin, on the monotonic clock;
//     the next renewal is due RenewInterval after that send, at once if its
//     answer came later), Done, Err, Lose and Release; a backend supplies
//     only the calls that talk to its store (ManagedLeaseConfig: Renew,
//     Watch, Release). A Watch that stopped without learning anything
//     returns ErrRetryWatch and is restarted.
//   - ReportAttempt tells the caller of Acquire how each attempt it
//     retries went (a failure, or nil for an attempt the store answered),
//     and WatchAttempt reports an attempt that waits for an answer for
//     good, so that the Elector logs, counts and reports a candidate that
//     cannot campaign the same way on every backend (attempt.go).
//   - BackendLimits gives every backend's Config the same defaults and
//     the same problems for its common fields (client, Timing, History,
//     Logger); InvalidConfig joins the problems into one error; LostError
//     is what a Lease's Err wraps after a loss.
//
// The in-memory backend, backends/memory, is built from this package
// alone, and is the worked example of a backend. Package backendtest is
// the conformance suite every backend runs.
package driver
