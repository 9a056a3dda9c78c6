// Package memory is a backend whose election, ledger and control store
// live in one process: a Server holds them, and each Candidate is one
// instance's Backend on it. It keeps every lease rule the other backends
// keep (a TTL on the process clock, tokens that only rise, a ledger whose
// claims are checked against the term in the same step), so it serves
//
//   - tests of code that embeds baton, also under testing/synctest, where
//     its TTL runs on the fake clock;
//   - one process that runs several schedulers and wants one of them to
//     lead;
//   - backend authors, as the worked example: it is built from package
//     the backend author's contract, driver, alone.
//
// A Candidate's path to the Server can be cut and healed like a network
// (Backend.Cut, Backend.Heal), and the Server can revoke the lease as a
// store that lost it would (Server.Revoke). Nothing survives the process:
// it is not a backend for instances of a service that run apart.
package memory
