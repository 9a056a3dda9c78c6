package main

import (
	"fmt"
	"strings"
	"time"
)

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
	ho(batonKubeName, "Kubernetes Lease", 50*time.Millisecond)

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
	// A candidate takes the Lease a TTL after it saw the last renewal.
	cr(batonKubeName, "Kubernetes Lease TTL 6 s", 6*time.Second+time.Second)

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
