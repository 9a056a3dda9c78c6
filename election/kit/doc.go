// Package kit is the backend author's kit: what a new election.Backend is
// built from, so that every backend applies the same lease rules.
//
// ManagedLease owns a lease's renew loop, its local safe deadline (last
// successful renewal sent + TTL - SafetyMargin, on the monotonic clock;
// the next renewal is due RenewInterval after that send, at once if its
// answer came later), Done, Err, Lose and Release; a backend supplies
// only the calls that talk to its store (ManagedLeaseConfig: Renew,
// Watch, Release). A Watch that stopped without learning anything returns
// ErrRetryWatch and is restarted.
//
// Why a package of its own: a person who embeds an Elector reads package
// election and never needs these names, and a person who writes a backend
// finds them here in one short package. The contract itself stays with
// its consumer, in election/backend.go (Backend, Lease and the optional
// Deadliner, Loser, LeaderReader, Checker), together with the pieces both
// audiences share: election.Timing, which users set in every backend's
// Config (its WithDefaults and Validate are the helpers a backend's own
// Validate calls), and election.LostError, whose result users match with
// errors.Is(err, election.ErrLeadershipLost). Keeping those in election,
// rather than aliasing them from here, lets kit import election and never
// the reverse.
//
// The in-memory backend, backends/memory, is built from this
// package and election's contract alone, and is the worked example of a
// backend.
package kit
