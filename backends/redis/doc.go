// Package redis is a baton election backend on Redis (7.0 and later),
// through github.com/redis/go-redis/v9: the maintained official client,
// with Lua scripting (EVALSHA, falling back to EVAL when the server lost
// the script), pub/sub, and Sentinel failover and Cluster clients in one
// API. Pinned at v9.23.0, which builds with Go 1.26. Config.Addr names a
// single server, SentinelAddrs and MasterName a primary watched by
// Sentinels, ClusterAddrs a Redis Cluster; WaitReplicas makes every write
// wait for replicas (see Limits for which setup keeps which guarantee).
//
// # Key layout
//
// An election is a name, Config.Election, e.g. "reports". Its keys all
// hold "{reports}", so they share one hash slot (Redis Cluster routes them
// together, and a script may touch them all):
//
//	baton:{reports}:lease        "<token> <nonce> <identity JSON>", expiry set by the server (PX TTL)
//	baton:{reports}:token        counter, INCRed once per term, never reset
//	baton:{reports}:events       pub/sub channel: "acquired <token>", "released <token>"
//	baton:{reports}:last         hash: job -> newest claimed tick (unix ns, 20 digits)
//	baton:{reports}:runs:<job>   list: "<tick> <token> <run JSON>", newest first
//
// Watch the leader with
//
//	redis-cli GET 'baton:{reports}:lease'
//	redis-cli PTTL 'baton:{reports}:lease'
//	redis-cli SUBSCRIBE 'baton:{reports}:events'
//
// Deleting the lease key (redis-cli DEL) ends the leader's term within
// RenewInterval/2 (its watch reads the key), at once if another candidate
// takes it meanwhile (its watch gets the "acquired" message).
//
// # Least privilege
//
// A user that can run one election and nothing else (ACLRules prints the
// rules for an election):
//
//	ACL SETUSER baton on >PASSWORD resetkeys resetchannels -@all ~baton:{reports}:* &baton:{reports}:* +ping +evalsha +eval +subscribe +unsubscribe +get +set +pexpire +pttl +incr +del +publish +hget +hset +hmget +hdel +lpush +ltrim +lrange +lset +zadd +zrem +zrangebylex +wait +cluster|slots
//
// Redis checks the ACL of every command a script calls, so the commands
// the scripts use are listed too. Check verifies each of them. WAIT is
// sent with WaitReplicas; a Cluster client reads CLUSTER SLOTS.
//
// More in this file, after the package clause (read the source):
// Fencing token, Self-fencing, Ledger, Limits.
package redis

// Details, kept out of the go doc overview above.
//
// # Fencing token
//
// The acquire script INCRs baton:{E}:token only when the lease key is
// absent (expired or released) and sets the lease key to the new token,
// in one atomic step: tokens grow with every term, whatever happened in
// between (by more than one after an attempt given up). Deleting the counter would restart tokens at 1: never do it.
//
// # Self-fencing
//
// driver.ManagedLease renews every RenewInterval with a script that PEXPIREs
// the key only if it still holds the term's token (so no holder renews or
// deletes another's lease), and ends the term locally at lastRenewalSent
// + TTL - SafetyMargin on the monotonic clock: the server cannot expire
// the key before lastRenewalSent + TTL by its own clock. A renewal that
// finds the key gone or another token ends the term at once.
//
// Acquire subscribes to the events channel before its first attempt, so
// a release is never missed; between attempts it waits for a message,
// the holder's PTTL or RenewInterval, whichever comes first (an expiry
// publishes nothing). Each attempt carries a nonce: an attempt whose
// answer was lost and is retried finds the key holding its nonce and
// takes it as its own. The client does not retry commands itself
// (MaxRetries -1). Release deletes the key with a script checking token
// and nonce, and publishes "released": a waiting candidate leads within
// milliseconds.
//
// # Ledger
//
// A batch of claims (MaxBatch, 500 by default) is one script call: it
// first checks that the lease key holds the claims' token (otherwise every
// claim is refused with ledger.ErrStaleTerm), then per claim compares the
// tick with the job's field in baton:{E}:last (a tick not after it is
// refused with ledger.ErrTickClaimed), sets it, LPUSHes the run entry and
// LTRIMs the job's list to History. A script blocks the server while it
// runs: measured here (TestClaimBatchTiming, no -race) a call of 500
// claims took 3.8 ms, of 5,000 23 ms; 500 keeps a renewal waiting behind
// a batch at a few milliseconds. Finish is one script per MaxBatch runs,
// replacing the entry with the same tick and token (LRANGE + LSET over
// at most History entries). LastClaimed is one HMGET per 1,000 jobs;
// History one LRANGE.
//
// State per job: one field of baton:{E}:last (the job name + 20 bytes)
// and one list of at most History entries of about 200 bytes (tick,
// token and the run's JSON, with the job name, instance and error text).
//
// # Limits
//
// Redis replicates asynchronously. On a failover to a replica (Sentinel,
// Cluster, a managed service), the writes not yet replicated are lost:
// the lease (another candidate then leads while the old leader's term is
// live: a leader cut off with its primary renews there until the
// partition heals), a claim (a tick may run twice), or the token counter
// (a token may be handed out twice). Keys expire by the server's clock; a
// server whose clock jumps forward expires leases early. Which setup
// keeps which guarantee:
//
//   - A single server (Addr), or one without failover: all of them.
//   - Sentinel, WaitReplicas 0: the limits above, at each promotion.
//     TestSentinelAsyncFailoverOverlaps shows it: the primary cut off from
//     its replica and the Sentinels, its leader (connected to it directly)
//     goes on leading; a candidate leads on the promoted replica once the
//     replicated key expires; both claim the same tick.
//   - Sentinel, WaitReplicas N: a write counts only once N replicas
//     acknowledged it (WAIT N WaitTimeout, pipelined with the script on
//     the same connection, as WAIT counts that connection's writes). With
//     fewer: Acquire gives the key up and tries again later; a renewal
//     fails (the term ends at its local deadline); each claim of the batch
//     fails with an error that is not ErrTickClaimed (the Host does not
//     start it and asks again; a refused retry writes too, so that its
//     WAIT covers the first attempt); a stale-term answer still ends the
//     term; Finish and Release return an error.
//     TestSentinelWaitReplicasFailsClosed shows the cut-off leader's term
//     ending within the TTL and no candidate leading on the promoted
//     replica until the old primary, back, is its replica. The price: no
//     leader, and no claim, while fewer than N replicas answer. Sentinel
//     promotes the replica with the largest replication offset; choose N
//     so that it holds every acknowledged write (all the replicas, e.g. 1
//     of 1).
//   - Cluster: as a single server per shard, since every key of the
//     election is in one slot, with the asynchronous limits at a failover
//     of that shard; WaitReplicas works there as with Sentinel (on the
//     slot's primary). Pub/sub is cluster-wide (SUBSCRIBE on the slot's
//     primary). Tested against three primaries without replicas.
