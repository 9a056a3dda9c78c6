// Package kube is a baton backend on Kubernetes: the election is a
// coordination.k8s.io/v1 Lease object, the one client-go's leader election
// (LeaseLock) uses, so a baton candidate and a client-go candidate of the
// same Lease exclude each other, and `kubectl get lease NAME -o yaml`
// shows the holder.
//
// # The Lease
//
// A term writes holderIdentity (the Identity's ID), leaseDurationSeconds
// (the TTL), acquireTime, renewTime and leaseTransitions as client-go
// does, plus two annotations: baton.dev/token, the term's fencing token,
// and baton.dev/identity, the holder's whole Identity. Every write is a
// PUT with the resourceVersion the writer last read, which the server
// refuses with 409 Conflict if anyone wrote the Lease since: a renewal
// that meets another holder ends the term. Release writes no holder and a
// duration of one second, as client-go does, and candidates watch the
// Lease, so a waiting candidate takes it within a few round trips instead
// of a polling period.
//
// # Expiry is judged on the candidates' clocks
//
// Nothing on the server expires a Lease: renewTime is the holder's wall
// clock, and clocks differ. A candidate, like client-go's, takes a held
// Lease only once it has seen the same resourceVersion for the Lease's
// leaseDurationSeconds on its own monotonic clock. The holder's term ends
// locally at its last successful renewal's send time + TTL -
// SafetyMargin, before any candidate could have seen that renewal expire.
// The margin covers the difference between the two clocks' rates over one
// TTL: with the default TTL of 15 s and SafetyMargin of 3 s, clock rates
// may differ by up to 20 % (NTP keeps them within a few parts per
// million), and the scheduling delay of the holder's process.
//
// client-go's candidates see less than baton's: they compare the Lease's
// record with renewTime cut to whole seconds, so a renewal within the
// same second as the one before is no renewal to them. A baton term
// therefore extends its deadline from the first write attempt of the
// second the Lease shows, not from the renewal's own send, and
// RenewInterval is at least a second (MinRenewInterval), so that
// renewals on time each show a new second. Without this a term renewed
// twice in one second outlived by up to a second what a client-go
// candidate allowed it (TestBatonCutThenClientGo in the interop module
// caught it: client-go led 1.44 s after the cut, 42 ms before baton's
// term ended).
//
// # Fencing tokens
//
// leaseTransitions restarts at zero when the Lease is deleted and created
// again, and resourceVersion is opaque, not an order. The token is
// therefore baton's own: a new term's token is one more than the highest
// of the Lease's baton.dev/token and the floor kept in the ConfigMap
// Name-terms (data.token). The term is handed out only after the floor has
// been raised to its token and the Lease read back as still its own, so a
// deleted Lease cannot make a token repeat. Terms of client-go candidates
// have no token; they keep the annotation, and the next baton term's token
// is above it.
//
// # Why not client-go
//
// The protocol is GET, POST, PUT with a resourceVersion and a watch on
// one object, which Client speaks as JSON over HTTPS (InClusterConfig for
// a pod's service account, whose token file it reads again every minute).
// client-go's leader election and clientset need 39 modules, 27 of which
// baton does not use already (measured with go list -deps at v0.36.3):
// every user of baton would download them, whatever backend they use.
// Its default client-side rate
// limit (5 requests per second, burst 10) would throttle a busy leader.
// The server's API Priority and Fairness may still answer 429; that is
// retried like any transient error until the local deadline. The tests
// run client-go candidates against baton's in a module of their own.
//
// # The ledger and the control store
//
// Kubernetes has no transaction over two objects, so a claim cannot check
// the Lease and record the tick at once. The ledger is 16 ConfigMaps,
// Name-ledger-00 to -15, with each job's last claimed tick and newest
// runs, and 64, Name-history-00 to -63, with its older runs (a job's
// shards are its name's hash); the control store is one, Name-control.
// Each keeps data.fence, the highest token that wrote it, and is written
// only by compare-and-swap (fenced.go). A claim reads the Lease (its
// token must be the holding baton term's) and then writes each ledger
// shard it touches, which must not be fenced above its token. A new
// term's catch-up raises the fences of the ledger shards it reads to its
// token, by a write, before it reads them: a deposed term's claim either
// landed before, and is read, or is refused. A finish moves a job's
// finished runs to its history shard once its ledger entry holds 4 to 7
// (history.go), so a claim rewrites a few runs per job whatever History
// is; past half its bound, a ledger shard moves every finished run but
// a job's newest. A run's error is kept to 512 bytes. At 10,000 jobs and
// History 20 the history shards hold about 16 MB, 260 KB each, and each
// ledger shard up to about 400 KB; an object refuses a write that would
// take it past 768 KiB, below the server's 1 MiB per ConfigMap.
//
// # Permissions
//
// A candidate needs get, create, update and watch on the Lease and get,
// create and update on the ConfigMaps Name-terms, Name-control,
// Name-audit (the tick accounts),
// Name-ledger-00 to -15 and Name-history-00 to -63 in Namespace (baton
// lock: the Lease and Name-terms only). Check reads the Lease and
// Name-terms, so a missing permission there fails at start.
package kube
