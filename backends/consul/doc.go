// Package consul is baton's Consul backend: leader election with a
// session and a lock on one KV key, compatible with `consul lock`.
//
// # How it works
//
// A candidate creates a session (TTL only, no health checks; behavior
// "release"; lock-delay Config.LockDelay, by default the TTL, never the
// server's silent 15 s default), then locks Config.Key with it
// (`?acquire=` semantics, in a transaction that returns the new
// ModifyIndex). While another session holds the key it waits with
// blocking queries of Config.WaitTime, so that cancelling a campaign is
// prompt; when a holder releases, the waiter's blocking query returns at
// once and it locks the key within milliseconds. After a crash Consul
// reaps the holder's session 2*TTL after the last renewal it received and
// then refuses the key for the lock-delay, so a follower leads within
// 2*TTL + LockDelay of that last renewal (30 s at the defaults), plus the
// moment it takes to see the key free and lock it.
//
// The leader renews its session every RenewInterval (Session().Renew),
// watches the key with blocking queries, and ends its term on its own at
// lastRenewalSent + TTL - SafetyMargin (driver.ManagedLease), long before
// Consul would reap the session. A renewal error is retried until that
// deadline, so one 500 from Consul does not end a term; Consul answering
// that the session is gone, or the key being deleted or held by another
// session, ends it at once. Release unlocks the key (no lock-delay) and
// then destroys the session, which then holds nothing: a graceful
// handover takes milliseconds.
//
// More in this file, after the package clause (read the source):
// Deregistered nodes and the lock-delay, Fencing token, Interoperating with `consul lock`, Seeing the leader, Ledger.
package consul

// Details, kept out of the go doc overview above.
//
// # Deregistered nodes and the lock-delay
//
// A session belongs to the node of the agent that created it: in
// production, the client agent on the leader's host. Without health
// checks a session outlives that node's failure, but not its
// deregistration: Consul deletes every session of a node that is
// force-left (`consul force-leave`, the usual clean-up of a failed node),
// leaves gracefully, is deregistered from the catalog or is reaped after
// reconnect_timeout, and of course a destroyed one. The leader may be cut
// off from Consul right then (its agent is the node that died) and keep
// leading until its local deadline, up to TTL - SafetyMargin after the last
// renewal it sent. Consul's answer is the lock-delay: after invalidating
// a session by any means but a release it refuses the session's keys for
// that long. Config.Validate therefore rejects a LockDelay shorter than
// MinLockDelay (the window TTL - SafetyMargin plus a tenth: 8.8 s at the
// defaults); the default is the TTL. So no deregistration hands the lock
// to another candidate while the old leader may still believe it leads;
// a crash failover pays for it with the lock-delay. A shorter window
// (a larger SafetyMargin, a shorter RenewInterval) allows a shorter
// lock-delay and a faster failover, and a leader that gives up sooner
// when Consul does not answer.
//
// What the lock-delay does not cover: deleting the key (`consul kv
// delete`) or releasing it with the holder's session ID frees it at once,
// as it is meant to; and Consul keeps lock-delays in its servers' memory
// only, so a server cluster that restarts from a snapshot taken after the
// invalidation forgets it.
//
// The other way round, a server that restarts re-applies, as it replays
// its raft log, the lock-delay of every invalidation in the log, counted
// from the replay, even to a key released gracefully since: once it leads,
// it refuses the key for up to the lock-delay. Acquire asks again every
// 500 ms while Consul refuses the key for a lock-delay, so a candidate
// leads within that of the delay's end; a graceful handover within the
// lock-delay after a server restart can take as long as the delay.
//
// # Fencing token
//
// The token of a term is the ModifyIndex of its lock operation. Consul's
// raft index grows with every write cluster-wide, so it is greater than
// the index of every earlier term's lock, even if the key was deleted and
// created again in between; the key's LockIndex would restart then, which
// is why it is not used. A new Consul cluster with wiped data starts its
// indexes again; its ledger is gone too.
//
// # Interoperating with `consul lock`
//
// `consul lock PREFIX cmd` locks PREFIX+"/.lock" with flags
// api.LockFlagValue. Set Config.Key to LockKey(PREFIX), which is that key,
// and the two exclude each other: baton puts the same flags on the key
// and waits while `consul lock` holds it, and `consul lock` waits (or
// times out with -timeout) while baton leads. `demo node --backend consul
// --election NAME` locks LockKey("service/baton/NAME"), the key of
// `consul lock service/baton/NAME`. While `consul lock` holds the key its
// value is empty, and Backend.Leader names the holder by its session.
// Semaphores (`consul lock -n N`, N > 1) use the key differently; Acquire
// refuses such a key with ErrKeyConflict.
//
// # Seeing the leader
//
// The key's value is JSON naming the leader, its session and token:
//
//	{"id":"node-a","host":"web-1","pid":4242,"started":"...","session":"8f0c...","token":1234,"acquired":"..."}
//
// In the Consul UI (for the dev agent, http://127.0.0.1:8500/ui), open
// Key/Value and the key: the value shows the leader and the Lock Session
// box links to its session (named "baton <id> <key>" unless
// Config.SessionName says otherwise). Sessions are also listed per node
// under Nodes -> the agent's node -> Lock Sessions. On the command line:
//
//	consul kv get -detailed service/baton/reports/.lock
//
// prints the value with its Session (empty when nobody leads; the value
// then names the last leader), LockIndex and ModifyIndex; and
// `consul lock`'s own holders show up the same way with an empty value.
//
// # Ledger
//
// Backend.Ledger returns a ledger.Ledger kept under Key+"-ledger/": per
// job a "last" entry (the newest claimed tick and the runs going) and a
// ring of History run entries. The claims of one instant go in Consul
// transactions of 127 (MaxBatch), each checking that the claiming term's
// session still holds the lock key, one CAS per claim; the finishes too,
// one CAS per run. Ledger's doc details the keys and the round trips.
