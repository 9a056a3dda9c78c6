package main

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

// methodNotes is methodNotesText with the redis-server version of this
// run.
func (r *results) methodNotes() string {
	v := r.redisVersion
	if v == "" {
		v = "(version unknown)"
	}
	return strings.ReplaceAll(methodNotesText, "{redis-version}", v)
}

const methodNotesText = `- Everything talks to loopback; all servers are local (embedded etcd 3.7.3 in a child process, a Consul 1.20 dev agent, PostgreSQL and MariaDB on 127.0.0.1, and a redis-server {redis-version} the bench starts on a free loopback port with no persistence: no RDB snapshots, no AOF). Loopback round trips are tens of microseconds, so handover figures are dominated by client and server processing, not the network.
- baton runs with its defaults except the TTL (etcd and SQL 2/5/10 s as stated, Redis 5 s, Consul 10 s, the server minimum); RenewInterval TTL/3, SafetyMargin max(TTL/5, 500 ms), SQL PollInterval 1 s, Redis followers woken by pub/sub and otherwise trying to acquire every RenewInterval (sooner when the key's PTTL is shorter), Redis Ledger MaxBatch 500, Consul WaitTime 2 s and LockDelay 10 s (the TTL; baton refuses one shorter than the leader's window TTL − SafetyMargin plus a tenth, 8.8 s, since Consul frees a deregistered node's lock after the lock-delay while its leader may still lead). Logging is off for every system (baton's per-run Info lines would otherwise be in the lateness figures; the peers log nothing per run).
- Raw ` + "`concurrency.Election`" + ` uses a ` + "`concurrency.Session`" + ` with the same TTL; ` + "`api.Lock`" + ` uses SessionTTL 10 s and LockDelay 1 ms (its defaults are 15 s and 15 s), everything else at its defaults.
- client-go: ` + "`k8s.io/client-go/tools/leaderelection`" + ` v0.37.2 at LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s, ReleaseOnCancel, on an in-memory ` + "`resourcelock.Interface`" + ` written here (one record with a resource version; an Update based on a stale Get fails with Conflict, as the API server does for a Lease). Its figures are dominated by those three parameters, not by any backend: handover waits for the follower's next retry (every 2-4.4 s), crash failover for LeaseDuration after the follower last saw the record change.
- Kubernetes: baton's ` + "`backends/kube`" + ` and client-go's ` + "`LeaseLock`" + ` (its v0.37.2, client-side limit raised to 50 QPS) on Leases of one kube-apiserver v1.36.3 on etcd 3.7.3 (` + "`.bin`" + `, built by ` + "`make tools`" + `), both at a lease duration of 6 s; client-go's RenewDeadline and RetryPeriod are its defaults scaled to it (4 s, 800 ms), with ReleaseOnCancel. Each candidate reaches the server through its own fault proxy (TLS passes through it uncounted).
- gocron v2 appears with its scheduler only (lateness). Its etcd elector module is not served by the module proxy here, so its handover figure is quoted from issue 9.
- Crash failover is simulated by a blackhole at the proxy, not by killing a process; loss detection is timed on the same, still-running, cut-off leader. Consul and client-go crash trials take 15-30 s each, so they run in 25 lanes side by side; SQL in 8 lanes (PostgreSQL's max_connections is 100); all crash systems and the idle-load pairs ran at the same time, which loads the 2 cores a little during those trials.
- Lateness for robfig/cron and gocron takes the nominal tick as the start time truncated to the second (they do not pass it to the job); that is exact while lateness stays below one second, which the sample counts confirm (no missing ticks).
`

// explanation says what bounds one kind of unmet target and what was
// tried. The report prints it once, under a heading of its own, and every
// unmet target of that kind links to it.
type explanation struct {
	title, text string
}

// explanations are keyed by target.why.
var explanations = map[string]explanation{
	"lateness-one": {"Lateness at one job", "At one job every runner starts the job a fraction of a millisecond after the tick; with one sample a second, p99 over the window is its second-largest sample, so the comparison is decided by scheduling noise on the shared 2-core machine (a wake-up delayed by another process), not by the runner: in development runs on this machine the order of the three runners at 1 job changed from run to run. Tried: logging off for every runner (`slog.DiscardHandler` for baton), a GC before each runner, the runners one after another rather than side by side."},
	"lateness":     {"Lateness at thousands of jobs", latenessBound},
	"handover":     {"Graceful handover", "The handover is the leader's release (one request), the backend's notification to the waiting instance (watch event, blocking query return, NOTIFY) and the waiting instance's acquire (two or three requests); on a loaded 2-core machine a single slow scheduling of one of these goroutines shows in the p99."},
	"failover":     {"Crash failover", "Failover is bounded by the TTL the backend enforces after the last renewal it received, plus how promptly the server reaps the expired lease (etcd checks for expired leases every 500 ms; Consul invalidates a session at 2×TTL, then keeps the key for the session's lock-delay) and the waiting instance's poll. Trials ran side by side (lanes) with every other crash system, which loads the shared 2 cores."},
	"loss":         {"Loss detection", "A trial where the old leader noticed after the next leader started breaks guarantee 1; see the loss detection table for the system and TTL."},
	"idle":         {"Idle followers", "See the idle load table for which kind of request exceeded the bound."},
	"ledger":       {"Lateness with the ledger", ledgerBound + " " + ledgerTried},
	"claims":       {"Claim round trips", "A batch goes before it is full only when the runs expected at the instant stop arriving for 250 ms (the claim queue's linger, counted from the last arrival), so the extra calls are partial batches sent while the run goroutines of an instant were still starting on the 2 busy cores."},
	"catch-up":     {"Catch-up at scale", "The new leader reads the last claimed ticks a page of MaxBatch jobs per read, 16 pages at once, and claims all jobs' catch-up runs in shared batches before its loop starts. The claim batches are applied one after another by the server, on the 2 cores the new leader shares with it."},
	"no-ledger":    {"The Host without a ledger", "At N jobs a second's burst costs N goroutine starts plus the Host's per-run work (a term check, the run's context, the overlap bookkeeping, the run's record) on 2 cores; the floor does only the starts. This ratio moves by a factor of two between runs on this machine (at 10,000 jobs it was 3.21× and 1.98× in two development runs); the Host's run path without a Ledger was not changed by this round."},
}

// whyKey is the explanation of a target that did not name one.
func whyKey(what string) string {
	switch {
	case strings.HasPrefix(what, "Tick lateness p99, 1 "):
		return "lateness-one"
	case strings.HasPrefix(what, "Tick lateness"):
		return "lateness"
	case strings.HasPrefix(what, "Graceful handover"):
		return "handover"
	case strings.HasPrefix(what, "Crash failover"):
		return "failover"
	case strings.HasPrefix(what, "Loss detection"):
		return "loss"
	case strings.HasPrefix(what, "Idle follower"):
		return "idle"
	}
	return ""
}

// anchor is the fragment of a heading as GitHub makes it: lower case,
// spaces to hyphens, other punctuation dropped.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// findings is the prose after the tables: what bounds each figure, with
// the measured numbers where they matter.
func (r *results) findings() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, "- "+format+"\n", args...) }
	if d, ok := r.find("baton etcd (TTL 5s)"); ok && d.n() > 0 {
		raw, _ := r.find("raw concurrency.Election (TTL 5s)")
		p("**Graceful handover** is a release (etcd: lease revoke, which deletes the key; Consul: unlock; SQL: an UPDATE that ends the row's expiry, with NOTIFY on PostgreSQL; Redis: a script that deletes the key if it still holds the term and publishes \"released\" on the election's channel) followed by the waiting instance's acquire, woken by the backend at once (etcd watch, Consul blocking query, LISTEN, Redis pub/sub). On etcd baton takes %s p50 where a bare `Resign` to `Campaign` takes %s: baton also stops the Host, waits for the lease's renew loop to end before revoking, and the new leader re-reads its own key before leading (etcd#19597). MariaDB has no notification, so its handover is bounded by PollInterval (uniform over 0-1 s here). client-go's is bounded by its RetryPeriod: the follower looks every 2-4.4 s.", fmtDur(d.p50()), fmtDur(raw.p50()))
	}
	if len(r.crash) > 0 {
		p("**Crash failover** is bounded by the backend's expiry of the dead leader's lease: etcd deletes the key when the lease's TTL runs out after the last keepalive it received (so between TTL − RenewInterval and TTL after the crash, plus up to the lessor's 500 ms check); SQL the row's expiry by the database clock, which the waiting instance sleeps until (it wakes just after the expiry rather than at its next poll); Consul reaps a session only at 2×TTL after its last renewal, then refuses the key for the session's lock-delay: baton's is the TTL (10 s), because Consul also frees the key LockDelay after a node deregistration (force-leave, leave, catalog deregister) while the cut-off leader may still lead for TTL − SafetyMargin; the raw `api.Lock` here runs with 1 ms and is exposed to that. baton and the raw etcd election fail over equally fast, as they should: the same server rule decides.")
		if c := r.crashOf("baton Redis (TTL 5s)"); c != nil && c.failover.n() > 0 {
			p("**Redis** fails over on the lease key's expiry (set with PX by the acquire and renew scripts, by the server's clock): a waiting instance whose refused attempt returns a PTTL shorter than its RenewInterval sleeps that PTTL plus 1 ms and tries again, and Redis expires a key when it is accessed, so the attempt right after the expiry wins; between TTL − RenewInterval and TTL after the crash, as on etcd, without etcd's 500 ms lessor check. Here %s p50, %s max.", fmtDur(c.failover.p50()), fmtDur(c.failover.max()))
		}
		if raw := r.crashOf("raw consul api.Lock (TTL 10s, LockDelay 1ms)"); raw != nil && raw.failover.n() > 0 {
			p("**`api.Lock`** fails over in %s p50 but %s at worst: after a refused lock attempt it retries only after a fixed 5 s (`DefaultLockRetryTime`), which can miss the moment the session is reaped. baton's Consul backend retries with a short backoff and a blocking query on the key.", fmtDur(raw.failover.p50()), fmtDur(raw.failover.max()))
		}
		var rawNeg, cgNeg int
		var rawMin time.Duration
		for _, c := range r.crash {
			if strings.HasPrefix(c.sys.name, "raw concurrency") {
				for _, g := range c.res.gap.s {
					if g <= 0 {
						rawNeg++
						rawMin = min(rawMin, g)
					}
				}
			}
			if c.sys.name == cgName {
				for _, g := range c.res.gap.s {
					if g <= 0 {
						cgNeg++
					}
				}
			}
		}
		p("**Loss detection.** baton ends a term at its own deadline, last renewal *sent* + TTL − SafetyMargin, on the monotonic clock, so its jobs are cancelled before the backend can expire the lease; the gap to the next leader is about the SafetyMargin plus the server's reaping delay, in every trial. The stock etcd session measures its deadline from when a keepalive *response arrives*, and learns of the expiry only then: in %d trials of the raw `concurrency.Election` its `Done` closed after the next leader had started (by up to %s). `api.Lock` never noticed while cut off: its monitor is a blocking query with no timeout, and renewal failures do not reach its lost channel (consul#18271). client-go with ReleaseOnCancel cancels the leader's context only after its release attempt also times out (RenewDeadline more), after the next leader started in %d trials; at its defaults (no ReleaseOnCancel) RenewDeadline 10 s < LeaseDuration 15 s keeps it ahead.", rawNeg, fmtDur(-rawMin), cgNeg)
	}
	if len(r.lateness) > 0 {
		p("**Tick lateness.** All three runners wake on one timer and start each due job on its own goroutine. baton's Host keeps one heap entry per instant (jobs due together share it), starts every due run before computing next ticks (once per distinct schedule), and keeps the run path off shared locks; robfig's runner sorts all entries on every wake and computes each entry's next tick as it goes; gocron v2 sends every job through its scheduler and executor goroutines over channels, which shows at 1,000 and 10,000 jobs. At 1 job the p50s are a few hundred microseconds and the p99s are decided by scheduling noise on this shared 2-core machine. The floor row shows what starting a goroutine per job costs here with no scheduler at all: at 10,000 jobs the last of a second's goroutines starts that long after the tick whatever the scheduler does.")
		for _, jobs := range []int{1000, 10000} {
			b, ok1 := r.lat("baton", jobs)
			f, ok2 := r.lat("robfig", jobs)
			fl, ok3 := r.lat("floor", jobs)
			if ok1 && ok2 && ok3 {
				p("At %d jobs, p99: floor %s, robfig %s, baton %s. A p99 1.5 times below robfig's would be %s, %s the floor.", jobs,
					fmtDur(fl.d.p99()), fmtDur(f.d.p99()), fmtDur(b.d.p99()), fmtDur(f.d.p99()*2/3),
					map[bool]string{true: "below", false: "above"}[f.d.p99()*2/3 < fl.d.p99()])
			}
		}
	}
	for _, row := range r.idle {
		if row.sys.proto == "pg" && row.res.follower != nil && row.res.follower[kOther] > 0 {
			p("**Idle PostgreSQL.** The follower's %.0f reads/min are its polls (one SELECT per PollInterval); the %.0f \"other\"/min are pings: pgx's database/sql adapter pings a pooled connection that sat idle for more than a second before reusing it, so with PollInterval 1 s nearly every poll costs an extra empty query, and the LISTEN connection is pinged every 5 s. They touch no table. The leader's %.0f renewals/min are TTL/3; its pings come from the same adapter.", row.res.follower[kRead], row.res.follower[kOther], row.res.leader[kRenew])
		}
		if row.sys.proto == "h2" && strings.HasPrefix(row.sys.name, "baton") && row.res.follower != nil {
			p("**Idle etcd.** A waiting baton instance keeps its own candidate key's lease alive (%.0f keepalives/min at TTL 5 s, RenewInterval TTL/3) and otherwise only holds one watch on the key before its own: no reads, no writes. The leader's only requests are its keepalives; its watch on its own key is one long-lived stream.", row.res.follower[kRenew])
		}
		if row.sys.proto == "redis" && row.res.follower != nil {
			p("**Idle Redis.** The follower subscribed to the election's channel once, when it started waiting (a long-lived subscription, so no blocking request falls in the window), and runs the acquire script %.0f times/min, refused while the key is held: once per RenewInterval, since the leader's renewals keep the key's PTTL above it. The leader renews %.0f times/min (TTL/3) and also reads its own key %.0f times/min: its watch reads the key on every message of the channel and every RenewInterval/2 between them, so that an operator's DEL or another term is seen within that.", row.res.follower[kWrite], row.res.leader[kRenew], row.res.leader[kRead])
		}
		if row.sys.proto == "http" && strings.HasPrefix(row.sys.name, "baton") && row.res.follower != nil {
			p("**Idle Consul.** The follower's blocking queries return every WaitTime (2 s) when nothing changes, %.0f/min; it renews its waiting session about as often (%.0f/min) so that its lock attempt, when it comes, counts from a fresh renewal. `api.Lock` polls less (LockWaitTime 15 s) at the cost of slower cancellation.", row.res.follower[kBlocking], row.res.follower[kRenew])
		}
	}
	if len(r.scale) == 2 && r.scale[0].err == nil && r.scale[1].err == nil {
		p("**Scale.** With %d candidates each waits on the key just before its own (no thundering herd): a handover wakes one candidate. baton's time to a leader is longer than the raw election's because each candidate also reads its own key back before leading and starts its renew loop and watch; etcd's CPU for %d idle baton candidates was %s per minute against %s for the raw election (each baton candidate renews every TTL/3 with a unary keepalive; a concurrency.Session streams its keepalives).", r.scale[0].n, r.scale[0].n, fmtDur(r.scale[0].idleCPU), fmtDur(r.scale[1].idleCPU))
	}
	return b.String()
}

// latenessBound says what bounds lateness at thousands of jobs and what was
// tried.
const latenessBound = "Every runner here starts a goroutine per run, so a second's burst of N runs costs N goroutine starts plus each runner's per-run work, on 2 cores; the floor row is that cost with no per-run work at all. What was tried in schedulerhost, measured with this benchmark: the first version scanned all jobs by name after every run under the Host's mutex (O(jobs²) a second; p99 about 300 ms at 10,000 jobs); then one heap entry per instant instead of one per job, the runs started before any next tick is computed, next ticks computed once per distinct schedule, per-job locks and atomics instead of the Host's mutex on the run path, no per-run cancellable context (the term's context is shared; only a job Timeout makes one), the lease deadline read without a lock, no log attributes built when the level is off, and a compact, nearly pointer-free in-memory run history (10,000 jobs' histories made every garbage collection scan 100,000 Run structs). Together these brought baton to or below robfig's runner at 1,000 and 10,000 jobs in this run, and below it in p50, but not 1.5 times below it in p99: what remains per run is what the guarantees cost (a term check against the lease before every start, the tick in the run's context, panic recovery, the run's record and the overlap bookkeeping) and the machine's goroutine-start floor. With GOGC=off in a development run baton and robfig were equal at 10,000 jobs, so garbage collection during the burst is part of the rest. A worker pool instead of a goroutine per run would cut the starts but would let one slow job delay others' starts, which a cron scheduler must not do."
