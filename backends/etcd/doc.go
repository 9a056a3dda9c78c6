// Package etcd is a baton election backend on etcd v3
// (go.etcd.io/etcd/client/v3).
//
// # Key layout
//
// An election is a key prefix, Config.Prefix, e.g. "/baton/elections/reports".
// Each Acquire grants a fresh etcd lease (TTL Config.Timing.TTL, whole seconds,
// at least 2 s) and puts one key under it:
//
//	PREFIX/<lease id in lowercase hex>  =  {"id":"node-1","host":"web-3","pid":4242,"started":"2026-..."}
//
// The candidate whose key has the lowest create revision leads; the others
// wait, each watching for the deletion of the key created just before its
// own. This is the layout of go.etcd.io/etcd/client/v3/concurrency.Election,
// so the standard tools see baton's elections and baton sees theirs:
//
//	etcdctl elect -l /baton/elections/reports        # print the leader's value, follow changes
//	etcdctl get --prefix /baton/elections/reports/   # every candidate, in key order
//	etcdctl get --prefix --sort-by=CREATE --order=ASCEND --limit=1 /baton/elections/reports/   # the leader
//	etcdctl lease timetolive --keys <lease id>        # remaining TTL of a candidate
//
// A candidate started with `etcdctl elect NAME` or concurrency.Election on
// the same prefix takes part in the same election. Deleting the leader's
// key, or revoking its lease, ends its term at once (its watch sees it).
//
// Elections may nest: PREFIX and PREFIX/eu are two elections. Only the
// keys directly under PREFIX/ (no further slash) are PREFIX's candidates;
// the keys of PREFIX/eu (PREFIX/eu/<lease id>) and of its ledger
// (PREFIX/eu-ledger/...) are not, so they neither hold PREFIX's
// candidates back nor show up as its leader. etcd's own tools do not make
// that distinction: `etcdctl elect -l PREFIX` and candidates of
// concurrency.Election on PREFIX count every key under PREFIX/, so with
// nested elections they may show a nested election's leader, and such a
// candidate waits for the nested keys too (for ever behind a nested
// ledger's), though it never leads alongside a baton leader.
//
// More in this file, after the package clause (read the source):
// Fencing token, Self-fencing, Ledger, Connections.
package etcd

// Details, kept out of the go doc overview above.
//
// # Fencing token
//
// A term's token (election.Lease.Token) is the create revision of its key.
// etcd revisions only grow across the whole cluster, so every later term,
// after a release, an expiry or a deleted key, has a larger token.
//
// # Self-fencing
//
// The lease is kept alive by driver.ManagedLease with one keepalive
// per RenewInterval, from the moment it is granted (also while waiting in
// the campaign). The term ends locally at lastKeepAliveSent + TTL -
// SafetyMargin on the monotonic clock: the server cannot expire the lease
// before lastKeepAliveSent + TTL, so a leader cut off from etcd stops
// before anyone else can be elected. The stock concurrency.Session does
// not do this: its deadline is measured from when a response arrives.
// The term also ends as soon as a watch on the key reports it deleted or
// put under another lease, or a keepalive reports the lease gone.
//
// Each lease's keepalives go, one at a time, over one LeaseKeepAlive
// stream of its own, opened before the lease is granted. A client with a
// user name and password authenticates again on every stream it opens,
// and the server checks the password with bcrypt each time (tens of
// milliseconds of its CPU, seconds on a loaded server or with a high
// --bcrypt-cost); clientv3's KeepAliveOnce opens a stream per call, so
// each renewal would wait for a password check. A new stream, and so a
// password check, is needed only when the stream fails: the connection
// broke, or its token expired (JWT tokens) or went stale (JWT tokens
// after any change to users or roles).
//
// Acquire checks, after the earlier candidates are gone, that its own key
// still exists under its lease and that the local deadline has not passed,
// so a campaign whose lease expired while it waited never returns a term
// (the failure of concurrency.Election.Campaign reported as etcd#19597).
// Every failure path of Acquire revokes its lease; if the server cannot be
// reached within half a second, the lease and its key expire after the TTL.
//
// Release revokes the lease, which deletes the key in the same step; the
// next candidate's watch fires within milliseconds.
//
// # Ledger
//
// The ledger of claimed ticks (see ledger.Ledger) lives under
// PREFIX + "-ledger/", outside the election's prefix, so it never takes
// part in the election. Its keys (PREFIX-ledger/<job>/last, ...) would
// look like the candidates of an election PREFIX-ledger/<job>, so New
// refuses a prefix with a path segment ending in "-ledger".
//
// Claims go in batches, one transaction each: it compares the create
// revision of the term's key with the token (the key, the election's
// oldest when the term first claimed, is looked up once per token and
// cached), and holds one nested transaction per claim that checks the
// job's last claimed tick, writes the claim and deletes the history its
// job's previous claim found beyond Config.History. etcd counts the
// operations of each level of a transaction against --max-txn-ops less
// those of the levels above, so a batch holds Config.MaxTxnOps - 4
// claims (124 with etcd's default 128). Finishes are batched the same
// way, each conditioned on the mod revision at which the Ledger's own
// claim put the run entry; a finish of a run it did not claim reads the
// entry first.
//
// # Connections
//
// The Backend uses the caller's *clientv3.Client as is: endpoints, TLS
// (client certificates) and user/password authentication come with it, and
// the Backend never closes it. Give the client a DialTimeout and
// DialKeepAliveTime/DialKeepAliveTimeout so dead connections are replaced.
// Watches and reads of the campaign use clientv3.WithRequireLeader, so a
// member cut off from its cluster's leader does not leave a candidate
// waiting on stale data.
