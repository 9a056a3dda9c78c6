// Package hosttest holds the failover suite every backend runs with real
// schedulerhost Hosts on its real Backend and Ledger: after a leader
// crashes, every tick is started at most once and the misfire policies
// cover the gap as documented; a deposed leader's claim is refused, its
// term ends, and it starts nothing.
//
// It lives here, not in election/electiontest, because it needs both the
// election and the scheduler: schedulerhost imports election, never the
// reverse.
package hosttest
