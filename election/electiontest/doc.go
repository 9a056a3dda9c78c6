// Package electiontest holds what every election backend is tested with:
// RunConformance, the suite of lease rules (exclusion, prompt and repeated
// handover, tokens, context bounds, a network cut ending the term first,
// crash failover), RunSmoke, and the helpers the backends' own tests
// share. The in-memory backend is backends/memory.
//
// The failover suite with real scheduler hosts lives in
// schedulerhost/hosttest: nothing under election/ imports schedulerhost.
package electiontest
