// Package backendtest is the one conformance suite every baton backend
// runs, from one test: Run(t, Harness) runs, as subtests,
//
//   - Election: the lease rules (exclusion, prompt and repeated handover,
//     rising tokens, context bounds, a network cut ending the term before
//     the store could give the lease away, crash failover);
//   - Ledger: claims once per tick, refused for a stale term, in batches,
//     with the history kept to its bound;
//   - Control: the control store's versioned writes, each fenced by the
//     term's token;
//   - Failover: real schedulerhost Hosts across a crash, per misfire
//     policy, and a deposed leader's claim refused;
//   - JobControl: operators' actions whose answers the network lost.
//
// Each part is also a function of its own (RunElection, RunLedger,
// RunControl, RunFailover, RunJobControl). A Harness tells the suite how
// to make fresh elections on the backend under test, each candidate with
// a network path of its own that the suite can cut: NewProxy is a TCP
// proxy on loopback for that, which a backend in another module can use.
// RunSmoke, Acquire, Release and the other helpers serve a backend's own
// tests. The in-memory backend, backends/memory, runs the suite with no
// server at all.
package backendtest
