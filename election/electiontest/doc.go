// Package electiontest holds what every election backend is tested with:
// RunConformance, the suite of lease rules (exclusion, prompt and repeated
// handover, tokens, context bounds, a network cut ending the term first,
// crash failover), RunSmoke, and Memory, an in-memory backend that lives
// in one process and is built only from election's contract and the
// backend kit (election/kit). Memory also keeps a ledger.Ledger, which
// runs the ledger suite (ledger/ledgertest).
//
// The failover suite with real scheduler hosts lives in
// schedulerhost/hosttest: nothing under election/ imports schedulerhost.
package electiontest
