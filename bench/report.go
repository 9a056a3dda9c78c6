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
	"unicode"
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

type target struct {
	what, bound, measured string
	note                  string // this run's figures behind it, when not met
	why                   string // key of its explanation in explanations (else whyKey(what))
	met                   bool
	known                 bool
}

func metStr(t target) string {
	switch {
	case !t.known:
		return "not measured"
	case t.met:
		return "**met**"
	default:
		return "**not met**"
	}
}

func (r *results) targets() []target {
	var ts []target
	ho := func(sys string, label string, bound time.Duration) {
		d, ok := r.find(sys)
		t := target{what: "Graceful handover p99, " + label, bound: "≤ " + fmtDur(bound)}
		if ok && d.n() > 0 {
			t.known, t.met = true, d.p99() <= bound
			t.measured = fmt.Sprintf("p99 %s (p50 %s, max %s, n=%d)", fmtDur(d.p99()), fmtDur(d.p50()), fmtDur(d.max()), d.n())
		}
		ts = append(ts, t)
	}
	ho("baton etcd (TTL 5s)", "etcd", 10*time.Millisecond)
	ho("baton Consul (TTL 10s)", "Consul", 10*time.Millisecond)
	ho("baton PostgreSQL (TTL 5s)", "PostgreSQL", 50*time.Millisecond)
	ho("baton MariaDB (TTL 5s)", "MariaDB (PollInterval 1 s)", time.Second+50*time.Millisecond)
	ho("baton Redis (TTL 5s)", "Redis", 10*time.Millisecond)

	cr := func(sys, label string, bound time.Duration) {
		c := r.crashOf(sys)
		t := target{what: "Crash failover p99, " + label, bound: "≤ " + fmtDur(bound)}
		if c != nil && c.failover.n() > 0 {
			t.known, t.met = true, c.failover.p99() <= bound && len(c.errs) == 0
			t.measured = fmt.Sprintf("p99 %s (p50 %s, max %s, n=%d)", fmtDur(c.failover.p99()), fmtDur(c.failover.p50()), fmtDur(c.failover.max()), c.failover.n())
			if len(c.errs) > 0 {
				t.measured += fmt.Sprintf("; %d trials failed", len(c.errs))
			}
		}
		ts = append(ts, t)
	}
	for _, ttl := range []int{2, 5, 10} {
		cr(fmt.Sprintf("baton etcd (TTL %ds)", ttl), fmt.Sprintf("etcd TTL %d s", ttl), time.Duration(ttl)*time.Second+700*time.Millisecond)
	}
	// Consul: 2×TTL (its reaping rule) + LockDelay (the TTL, baton's default
	// and at least the leader's window; see consul.MinLockDelay) + 0.5 s.
	cr("baton Consul (TTL 10s)", "Consul TTL 10 s, LockDelay 10 s (the TTL)", 30*time.Second+500*time.Millisecond)
	for _, db := range []string{"PostgreSQL", "MariaDB"} {
		for _, ttl := range []int{2, 5} {
			cr(fmt.Sprintf("baton %s (TTL %ds)", db, ttl), fmt.Sprintf("%s TTL %d s, PollInterval 1 s", db, ttl), time.Duration(ttl)*time.Second+time.Second+200*time.Millisecond)
		}
	}
	cr("baton Redis (TTL 5s)", "Redis TTL 5 s", 5*time.Second+500*time.Millisecond)

	// Loss detection.
	{
		t := target{what: "Loss detection before the next leader starts, every baton trial", bound: "min gap > 0, none undetected"}
		var n, und int
		minGap := time.Duration(1 << 62)
		for _, c := range r.crash {
			if !c.sys.hasJob {
				continue
			}
			n += c.res.gap.n()
			und += c.res.undetected
			if c.res.gap.n() > 0 {
				minGap = min(minGap, c.res.gap.min())
			}
		}
		if n > 0 {
			t.known, t.met = true, und == 0 && minGap > 0
			t.measured = fmt.Sprintf("min gap %s over %d trials, %d undetected", fmtDur(minGap), n, und)
		}
		ts = append(ts, t)
	}

	// Lateness.
	for _, jobs := range []int{1, 1000, 10000} {
		b, ok1 := r.lat("baton", jobs)
		f, ok2 := r.lat("robfig", jobs)
		t := target{what: fmt.Sprintf("Tick lateness p99, %d every-second job(s), vs robfig/cron's runner in the same run", jobs)}
		factor := 1.5
		if jobs == 1 {
			factor = 1
			t.bound = "≤ robfig p99"
		} else {
			t.bound = "≤ robfig p99 / 1.5"
		}
		if ok1 && ok2 && b.d.n() > 0 && f.d.n() > 0 {
			t.known = true
			t.met = float64(b.d.p99())*factor <= float64(f.d.p99())
			t.measured = fmt.Sprintf("baton %s vs robfig %s (%s)", fmtDur(b.d.p99()), fmtDur(f.d.p99()),
				fmtRatio(float64(f.d.p99())/float64(b.d.p99()))+" better")
		}
		ts = append(ts, t)
	}

	// Idle follower.
	for _, row := range r.idle {
		if !strings.HasPrefix(row.sys.name, "baton") || row.res.err != nil || row.res.follower == nil {
			continue
		}
		f := row.res.follower
		t := target{what: "Idle follower, " + strings.TrimPrefix(row.sys.name, "baton "), known: true}
		switch row.sys.proto {
		case "h2":
			t.bound = "0 reads, 0 writes (watch only, plus its own keepalives)"
			t.met = f[kRead] == 0 && f[kWrite] == 0
		case "http":
			t.bound = "≤ 1 blocking read per WaitTime (2 s): ≤ 30/min, no other reads"
			t.met = f[kBlocking] <= 30.5 && f[kRead] == 0 && f[kWrite] == 0
		case "pg", "mysql":
			t.bound = "≤ 60/PollInterval (1 s) = 60 reads/min, 0 writes"
			t.met = f[kRead] <= 60.5 && f[kWrite] == 0 && f[kRenew] == 0
		case "redis":
			// A waiting instance is woken by pub/sub, and otherwise runs
			// the acquire script (a write when the key is free, refused
			// here) once per RenewInterval: the leader's renewals keep the
			// key's PTTL above it.
			ri := redisRenew(row.sys.ttl)
			n := float64(time.Minute) / float64(ri)
			t.bound = fmt.Sprintf("≤ 1 acquire attempt per RenewInterval (TTL/3 = %s): ≤ %.0f script calls/min, 0 reads, 0 renewals", fmtDur(ri), n)
			t.met = f[kWrite] <= n+0.5 && f[kRead] == 0 && f[kRenew] == 0
		}
		t.measured = idleCell(f)
		ts = append(ts, t)
	}
	return ts
}

func idleCell(m map[string]float64) string {
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]))
	}
	return fmt.Sprintf("%.1f/min (%s)", total(m), strings.Join(parts, ", "))
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
		w("A crash is simulated by blackholing the leader's connection at a fault proxy (`faultproxy.Blackhole`): bytes in either direction are held and never delivered, so the backend sees no release and no more renewals, exactly as after kill -9 of a process whose TCP connection stays half-open. (For client-go, every call of that candidate's in-memory lock hangs until its context ends.) The time is from the blackhole to the next leader's lead function starting. The cut falls at a random point of the leader's renew interval. Each trial is a fresh leader (running a job, for baton) and a fresh waiting follower, each behind its own proxy; trials run in independent elections side by side (lanes), since each takes about a TTL of waiting.\n\n")
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
		w("One leader (no job due) and one follower, each behind its own counting proxy (a wrapper in bench/ in front of a `faultproxy.Proxy`), counted for %v after 5 s of warm-up, as requests per minute. Requests, not bytes: etcd — the proxy decodes the client's HTTP/2 frames (HPACK for the method) and counts every gRPC request message, so a unary call is one and each keepalive or watch request on a stream is one (Range = read; Put/Txn/DeleteRange/LeaseGrant/LeaseRevoke = write; LeaseKeepAlive = renew; Watch = blocking); Consul — each HTTP request (GET /v1/kv with `index` = blocking; session renew = renew; PUT /v1/kv, /v1/txn = write; session create/destroy = other); PostgreSQL — each simple Query and each extended-protocol Execute, by statement text; MariaDB — each COM_QUERY, COM_STMT_EXECUTE and COM_PING; Redis — each RESP command, a script call (EVALSHA, or EVAL after NOSCRIPT) told apart by its keys (the renew script = renew; the acquire, release, Ledger claim and finish scripts = write, an acquire attempt counting as one even when refused; GET, HMGET, LRANGE = read; SUBSCRIBE = blocking; HELLO, PING = other); client-go — each call of its lock (Get = read; Update of its own record = renew). \"other\" is pings (pgx checks an idle pooled connection with an empty query before reuse; the LISTEN connection is pinged every 5 s) and session bookkeeping.\n\n", r.opts.idleWindow)
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
