package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

type latRow struct {
	runner  string
	jobs    int
	d       dist
	missing int
	window  time.Duration
}

type hoRow struct {
	sys *system
	d   dist
	err error
}

type idleRow struct {
	sys   *system
	order int
	res   idleResult
}

type crashRow struct {
	sys   *system
	order int
	res   *crashResult
	lanes int
}

type results struct {
	mu           sync.Mutex
	opts         options
	began        time.Time
	took         time.Duration
	machine      string
	load         [2]string // the 1-minute load average at the start and at the end of the run
	lateness     []latRow
	handover     []hoRow
	idle         []idleRow
	crash        []crashRow
	scale        []scaleResult
	ledger       []ledRow
	ledgerBase   []latRow // no-ledger Host and floor rows of the ledger section
	catchUp      []catchRow
	acc          *accResults   // the accounting section
	trace        *traceResults // the tracing section
	etcdBaseline time.Duration // etcd CPU per minute with no candidates
	redisVersion string        // of the bench's redis-server, e.g. "7.0.15"
}

// loadAvg returns the 1-minute load average, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

func describeMachine() string {
	model := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(l[strings.IndexByte(l, ':')+1:])
				break
			}
		}
	}
	mem := "unknown"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
	}
	nproc := fmt.Sprint(runtime.NumCPU())
	if out, err := exec.Command("nproc").Output(); err == nil {
		nproc = strings.TrimSpace(string(out))
	}
	kernel := ""
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		kernel = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("`nproc` %s (GOMAXPROCS %d), CPU %s, memory %s, %s, %s, %s/%s",
		nproc, runtime.GOMAXPROCS(0), model, mem, kernel, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func (r *results) find(name string) (dist, bool) {
	for _, h := range r.handover {
		if h.sys.name == name {
			return h.d, h.err == nil
		}
	}
	return dist{}, false
}

func (r *results) crashOf(name string) *crashResult {
	for _, c := range r.crash {
		if c.sys.name == name {
			return c.res
		}
	}
	return nil
}

func (r *results) lat(runner string, jobs int) (latRow, bool) {
	for _, l := range r.lateness {
		if l.runner == runner && l.jobs == jobs {
			return l, true
		}
	}
	return latRow{}, false
}

func (r *results) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmarks\n\n")
	w("baton beside the tools users would otherwise pick, all measured in one run of `make bench` (`bench/run.sh`: builds the separate module in `bench/` and runs it with `-out docs/benchmarks.md`; by hand: `cd bench && go run . -out ../docs/benchmarks.md`). This file is generated; edit `bench/report.go` instead.\n\n")
	w("- Date: %s; the run took %s.\n", r.began.UTC().Format("2006-01-02 15:04 MST"), r.took.Round(time.Second))
	w("- Machine: %s.\n", r.machine)
	w("- Load average (1 minute) at the start of the run: %s; at its end: %s. Anything above what the run itself adds is other work on the machine; its 2 cores are the bound on the lateness figures at 1,000 and 10,000 jobs.\n", r.load[0], r.load[1])
	w("- Every figure is p50 / p99 / max over n trials (n in each row); p99 is the nearest-rank percentile, so with 50 trials it is the largest but one.\n")
	w("- Figures move by tens of percent between runs on this shared machine.\n")
	if r.opts.quick {
		w("- **Quick mode**: few trials and short windows; not for publishing.\n")
	}
	w("\n## Targets (issue 9)\n\n| Target | Bound | Measured | |\n|---|---|---|---|\n")
	var unmet []target
	for _, t := range append(r.targets(), r.ledgerTargetRows()...) {
		w("| %s | %s | %s | %s |\n", t.what, t.bound, t.measured, metStr(t))
		if t.known && !t.met {
			unmet = append(unmet, t)
		}
	}
	// Each unmet target gets its own figures and a link to the
	// explanation it shares with others; each explanation is printed
	// once, after the list.
	var whys []string
	for _, t := range unmet {
		line := "**Not met: " + t.what + ".**"
		if t.note != "" {
			line += " " + t.note
		}
		why := t.why
		if why == "" {
			why = whyKey(t.what)
		}
		if e, ok := explanations[why]; ok {
			line += fmt.Sprintf(" Why: [%s](#%s).", e.title, anchor(e.title))
			if !slices.Contains(whys, why) {
				whys = append(whys, why)
			}
		}
		w("\n%s\n", line)
	}
	for _, why := range whys {
		e := explanations[why]
		w("\n### %s\n\n%s\n", e.title, e.text)
	}

	// Handover.
	if len(r.handover) > 0 {
		w("\n## 1. Graceful handover\n\n")
		w("The leader is asked to stop, as on SIGTERM, with no job running; the time is from the stop request to the other instance's lead function starting (baton: `Elector.Run` + `schedulerhost.Host.Lead`; raw etcd: `Resign` → the waiting `Campaign` returns; `api.Lock`: `Unlock` → the waiting `Lock` returns; client-go: cancel with `ReleaseOnCancel` → `OnStartedLeading` of the other). Two instances in one election, connected directly to the server; the stopped one restarts and waits for the next trial; the stop falls at a random point 100-350 ms (plus a uniformly random fraction of the period at which the waiting instance looks at the backend, for polling ones: 1 s for MariaDB, 4.4 s — RetryPeriod × (1 + JitterFactor) — for client-go, RenewInterval (%s) for Redis, whose waiting instance is woken by pub/sub and otherwise tries every RenewInterval) after the waiting instance started.\n\n", fmtDur(redisRenew(5*time.Second)))
		w("| System | n | p50 / p99 / max | baton / peer (p50 / p99) |\n|---|---|---|---|\n")
		rawE, _ := r.find("raw concurrency.Election (TTL 5s)")
		rawC, _ := r.find("raw consul api.Lock (TTL 10s, LockDelay 1ms)")
		cg, _ := r.find(cgName)
		for _, h := range r.handover {
			ratios := ""
			switch h.sys.name {
			case "baton etcd (TTL 5s)":
				ratios = "vs raw etcd " + ratio(h.d, rawE) + "; vs client-go " + ratio(h.d, cg)
			case "baton Consul (TTL 10s)":
				ratios = "vs api.Lock " + ratio(h.d, rawC) + "; vs client-go " + ratio(h.d, cg)
			case "baton PostgreSQL (TTL 5s)", "baton MariaDB (TTL 5s)", "baton Redis (TTL 5s)":
				ratios = "vs client-go " + ratio(h.d, cg)
			case batonKubeName:
				if cgk, ok := r.find(clientGoKubeName); ok {
					ratios = "vs client-go LeaseLock on the same server " + ratio(h.d, cgk)
				}
			}
			name := h.sys.name
			if h.sys.poll > 0 {
				name += fmt.Sprintf(", PollInterval %v", h.sys.poll)
			}
			if h.sys.proto == "pg" {
				name += ", LISTEN/NOTIFY"
			}
			if h.sys.proto == "redis" {
				name += ", pub/sub"
			}
			if h.err != nil {
				name += " — error: " + h.err.Error()
			}
			w("| %s | %d | %s | %s |\n", name, h.d.n(), h.d.triple(), ratios)
		}
		w("| gocron v2 + go-co-op etcd elector (TTL 10 s) — quoted from issue 9, not measured here (the elector module is not served by the module proxy) | — | 8.4 s p50 (its Stop does not resign) | — |\n")
		w("\nclient-go's handover is bounded by its RetryPeriod (2 s, with up to 1.2× jitter): the follower only looks at the lock that often; its trials ran in %d independent elections side by side.\n", 10)
	}

	// Crash.
	if len(r.crash) > 0 {
		rows := slices.Clone(r.crash)
		slices.SortFunc(rows, func(a, b crashRow) int { return a.order - b.order })
		w("\n## 2. Crash failover\n\n")
		w("A crash is simulated by blackholing the leader's connection at a fault proxy (`proxytest.Blackhole`): bytes in either direction are held and never delivered, so the backend sees no release and no more renewals, exactly as after kill -9 of a process whose TCP connection stays half-open. (For client-go, every call of that candidate's in-memory lock hangs until its context ends.) The time is from the blackhole to the next leader's lead function starting. The cut falls at a random point of the leader's renew interval. Each trial is a fresh leader (running a job, for baton) and a fresh waiting follower, each behind its own proxy; trials run in independent elections side by side (lanes), since each takes about a TTL of waiting.\n\n")
		w("| System | TTL | n (lanes) | p50 / p99 / max | bound | baton / raw (p50 / p99) |\n|---|---|---|---|---|---|\n")
		for _, c := range rows {
			bound, rat := "", ""
			s := c.sys
			switch {
			case strings.HasPrefix(s.name, "baton etcd"):
				bound = "TTL + 0.7 s = " + fmtDur(s.ttl+700*time.Millisecond)
				if raw := r.crashOf(strings.Replace(s.name, "baton etcd", "raw concurrency.Election", 1)); raw != nil {
					rat = ratio(c.res.failover, raw.failover)
				}
			case strings.HasPrefix(s.name, "baton Consul"):
				bound = "2×TTL + LockDelay (= TTL) + 0.5 s = " + fmtDur(3*s.ttl+500*time.Millisecond)
				if raw := r.crashOf("raw consul api.Lock (TTL 10s, LockDelay 1ms)"); raw != nil {
					rat = ratio(c.res.failover, raw.failover)
				}
			case s.poll > 0:
				bound = "TTL + PollInterval + 0.2 s = " + fmtDur(s.ttl+s.poll+200*time.Millisecond)
			case strings.HasPrefix(s.name, "baton Redis"):
				bound = "TTL + 0.5 s = " + fmtDur(s.ttl+500*time.Millisecond)
			}
			errs := ""
			if len(c.res.errs) > 0 {
				errs = fmt.Sprintf(" — %d trials failed: %s", len(c.res.errs), c.res.errs[0])
			}
			w("| %s%s | %v | %d (%d) | %s | %s | %s |\n", s.name, errs, s.ttl, c.res.failover.n(), c.lanes, c.res.failover.triple(), bound, rat)
		}
		w("| api.Lock at its defaults (SessionTTL 15 s, LockDelay 15 s) — quoted from issue 9 | 15s | — | 39.4 s p50 | | |\n")
		w("| client-go at its defaults — quoted from issue 9 | 15s | — | 17.3 s p50 / 20.0 s max | | |\n")

		w("\n## 3. Loss detection\n\n")
		w("Same trials as crash failover. Detection is the time from the cut to the old leader learning it lost: for baton, the running job's context is cancelled with `election.ErrLeadershipLost`; raw etcd: the session's `Done`; `api.Lock`: its lost channel; client-go: the `OnStartedLeading` context. The gap is the next leader's start minus that instant: it must be positive in every trial (the old leader stops before anyone else starts). \"Undetected\" counts trials where the old leader still had not noticed TTL + 5 s after the next leader started.\n\n")
		w("| System | TTL | n | detection p50 / p99 / max | gap min / p50 | undetected |\n|---|---|---|---|---|---|\n")
		for _, c := range rows {
			g := "—"
			if c.res.gap.n() > 0 {
				g = fmtDur(c.res.gap.min()) + " / " + fmtDur(c.res.gap.p50())
			}
			w("| %s | %v | %d | %s | %s | %d |\n", c.sys.name, c.sys.ttl, c.res.failover.n(), c.res.detect.triple(), g, c.res.undetected)
		}
	}

	// Lateness.
	if len(r.lateness) > 0 {
		w("\n## 4. Tick lateness\n\n")
		w("N jobs, each every second (`* * * * * *`), on one scheduler in this process, nothing else running; lateness is the job function's start minus the nominal tick. baton's `Host` (one timer, a heap over `cron.Schedule.Next`, a goroutine per run, term checks and a run context per run) runs under a term context; robfig/cron v3's `Cron` runner (`cron.WithSeconds()`); gocron v2 (`CronJob(spec, true)`); and a floor: a loop that sleeps to each second and starts one bare goroutine per job, the least any goroutine-per-run scheduler can do on this machine. Window: %v at 1 job (one sample a second), %v at 1,000 and 10,000 jobs, after 2 s of warm-up; the runners ran one after another in the same run. \"Missing\" is ticks in the window with no run recorded.\n\n", r.opts.latWindow1, r.opts.latWindow)
		w("| Jobs | Runner | n | p50 / p99 / max | missing | baton / peer (p50 / p99) |\n|---|---|---|---|---|---|\n")
		for _, l := range r.lateness {
			rat := ""
			if l.runner != "baton" {
				if b, ok := r.lat("baton", l.jobs); ok {
					rat = ratio(b.d, l.d)
				}
			}
			w("| %d | %s | %d | %s | %d | %s |\n", l.jobs, runnerName(l.runner), l.d.n(), l.d.triple(), l.missing, rat)
		}
		w("\nFor reference, issue 9 quotes p99 measured earlier on a machine of the same kind: robfig 0.8 / 3.8 / 25.5 ms and gocron v2 1.1 / 21.9 / 209.7 ms at 1 / 1,000 / 10,000 jobs. The targets compare with the robfig figures of this run.\n")
	}

	// Idle.
	if len(r.idle) > 0 {
		rows := slices.Clone(r.idle)
		slices.SortFunc(rows, func(a, b idleRow) int { return a.order - b.order })
		w("\n## 5. Idle load\n\n")
		w("One leader (no job due) and one follower, each behind its own counting proxy (a wrapper in bench/ in front of a `proxytest.Proxy`), counted for %v after 5 s of warm-up, as requests per minute. Requests, not bytes: etcd — the proxy decodes the client's HTTP/2 frames (HPACK for the method) and counts every gRPC request message, so a unary call is one and each keepalive or watch request on a stream is one (Range = read; Put/Txn/DeleteRange/LeaseGrant/LeaseRevoke = write; LeaseKeepAlive = renew; Watch = blocking); Consul — each HTTP request (GET /v1/kv with `index` = blocking; session renew = renew; PUT /v1/kv, /v1/txn = write; session create/destroy = other); PostgreSQL — each simple Query and each extended-protocol Execute, by statement text; MariaDB — each COM_QUERY, COM_STMT_EXECUTE and COM_PING; Redis — each RESP command, a script call (EVALSHA, or EVAL after NOSCRIPT) told apart by its keys (the renew script = renew; the acquire, release, Ledger claim and finish scripts = write, an acquire attempt counting as one even when refused; GET, HMGET, LRANGE = read; SUBSCRIBE = blocking; HELLO, PING = other); client-go — each call of its lock (Get = read; Update of its own record = renew). \"other\" is pings (pgx checks an idle pooled connection with an empty query before reuse; the LISTEN connection is pinged every 5 s) and session bookkeeping.\n\n", r.opts.idleWindow)
		w("| System | Role | total/min | read | blocking | write | renew | other |\n|---|---|---|---|---|---|---|---|\n")
		for _, row := range rows {
			if row.res.err != nil {
				w("| %s | — | error: %v | | | | | |\n", row.sys.name, row.res.err)
				continue
			}
			for _, role := range []string{"leader", "follower"} {
				m := row.res.leader
				if role == "follower" {
					m = row.res.follower
				}
				w("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", row.sys.name, role, total(m), m[kRead], m[kBlocking], m[kWrite], m[kRenew], m[kOther])
			}
		}
	}

	// Scale.
	if len(r.scale) > 0 {
		w("\n## 6. Scale: %d candidates on one etcd\n\n", r.scale[0].n)
		w("%d candidates (TTL 5 s), each with its own etcd client as separate processes would have, on one single-member etcd. The etcd server runs in a child process (this binary re-executed, `etcdtest.StartDir`), so its CPU time is its own: user + system time from `/proc/PID/stat`, read before and after (10 ms resolution). Baseline: that server with no candidates used %s of CPU per minute. Time to a leader: all candidates start at once on a fresh election; handover: the leader stops gracefully with the others waiting, and a replacement joins.\n\n", r.scale[0].n, fmtDur(r.etcdBaseline))
		w("| Kind | time to a leader (n) | handover (n) | etcd CPU idle, per minute | etcd CPU per handover | etcd CPU per start-at-once + stop cycle |\n|---|---|---|---|---|---|\n")
		for _, s := range r.scale {
			name := "baton etcd"
			if s.kind == "raw" {
				name = "raw concurrency.Election"
			}
			if s.err != nil {
				name += " — error: " + s.err.Error()
			}
			w("| %s | %s (%d) | %s (%d) | %s | %s | %s |\n", name, s.toLeader.triple(), s.toLeader.n(), s.handover.triple(), s.handover.n(), fmtDur(s.idleCPU), fmtDur(s.handoverCPU), fmtDur(s.startStopCPU))
		}
		if len(r.scale) == 2 {
			w("| baton / raw (p50 / p99) | %s | %s | | | |\n", ratio(r.scale[0].toLeader, r.scale[1].toLeader), ratio(r.scale[0].handover, r.scale[1].handover))
		}
	}
	r.ledgerMarkdown(w)
	r.accountingMarkdown(w)
	r.tracingMarkdown(w)
	w("\n## What the figures say\n\n%s", r.findings())
	w("\n## Method and honest limits\n\n%s", r.methodNotes())
	return b.String()
}

func runnerName(r string) string {
	switch r {
	case "baton":
		return "baton `schedulerhost.Host`"
	case "robfig":
		return "robfig/cron v3 runner"
	case "floor":
		return "floor: bare goroutines, no scheduler"
	default:
		return "gocron v2"
	}
}
