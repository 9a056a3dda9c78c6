package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// The absence metrics from outside: real nodes, their /metrics scraped.
const (
	overdueTTL      = 5 * time.Second
	overdueDeadline = 10 * time.Second
	hangEvery       = 15 * time.Second // the job "hang"'s @every
	beatEvery       = 5 * time.Second  // the job "beat"'s @every
	// absencePoll is the nodes' absence poll interval (the default).
	absencePoll = baton.DefaultAbsencePollInterval
	// scrapeMargin absorbs a loaded machine: the poll's reads, the scrape.
	scrapeMargin = 5 * time.Second
)

// TestAbsenceMetrics runs two campaigning nodes and a standby (--standby:
// it never campaigns) with TTL 5 s (Consul: 10 s, its least) and two jobs with a deadline of 10 s:
// "hang", whose run hangs on the leader once the test says so, and
// "beat", which runs ok every 5 s. Every instance, followers and the
// standby included, must show "hang" overdue within the deadline and one
// absence poll of the tick whose run hangs, and not before. Then both
// campaigning nodes are SIGSTOPped: the standby must report nobody
// leading (baton_election_leaderless_seconds above 0) and "beat" overdue
// once its deadline passes without a leader.
func TestAbsenceMetrics(t *testing.T) {
	skipUnlessLong(t, "starts servers and node processes")
	eachBackend(t, "etcd", runAbsenceMetrics)
}

func runAbsenceMetrics(t *testing.T, name string) {
	sc := &scenario{}
	var hangFile string
	var ttl time.Duration
	startCluster(t, name, sc, clusterOpts{label: "absence", nodes: 3, standby: 1, jobs: func(be *backend, sc *scenario) string {
		hangFile = filepath.Join(sc.dir, "hang")
		ttl = max(overdueTTL, be.ttl) // Consul's least TTL is 10 s
		return absenceJobs(be, ttl, sc.runsPath, hangFile)
	}})
	procs := sc.live()
	// Every instance has seen an ok run of both jobs.
	if !waitFor(60*time.Second, func() bool {
		for _, p := range procs {
			for _, job := range []string{"hang", "beat"} {
				if v, ok := scrape(p, "baton_job_last_success_timestamp_seconds", job); !ok || v == 0 {
					return false
				}
			}
		}
		return true
	}) {
		t.Fatalf("%s: not every instance saw an ok run of hang and beat within 60 s; logs in %s", name, sc.dir)
	}

	// 1. The next tick of "hang" (at least a second away) hangs.
	if err := os.WriteFile(hangFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tick := time.Now().Add(time.Second).Truncate(hangEvery).Add(hangEvery)
	sc.note("info-hang", name, "the run of hang's tick %s hangs", tick.Format("15:04:05"))
	time.Sleep(time.Until(tick.Add(overdueDeadline - 2*time.Second)))
	// From here every instance is scraped together, each second's value
	// kept for the rule test below.
	series := newOverdueSeries(time.Now(), procs)
	for _, p := range procs {
		v, ok := scrape(p, "baton_job_overdue", "hang")
		if !ok || v != 0 {
			t.Errorf("%s: %s shows hang overdue %v (present %v) 8 s after the tick, before its deadline", name, p.id, v, ok)
			continue
		}
		series.sample(p.id, time.Now(), v)
	}
	bound := tick.Add(overdueDeadline + absencePoll + scrapeMargin)
	seen := map[string]bool{}
	waitFor(time.Until(bound), func() bool {
		got := series.scrapeAll(procs, "hang")
		for _, p := range procs {
			if v, ok := got[p.id]; ok && v == 1 && !seen[p.id] {
				seen[p.id] = true
				sc.note("info-overdue", p.id, "hang overdue %v after its tick", time.Since(tick).Round(time.Millisecond))
			}
		}
		return len(seen) == len(procs)
	})
	for _, p := range procs {
		if !seen[p.id] {
			t.Errorf("%s: %s does not show hang overdue %v after the tick whose run hangs (deadline %v, poll %v, margin %v)",
				name, p.id, time.Since(tick).Round(time.Millisecond), overdueDeadline, absencePoll, scrapeMargin)
		}
	}
	if len(seen) == len(procs) {
		// The shipped rule, fed with those series, fires.
		out, err := series.ruleTest(t, sc.dir, sc.election, "hang")
		if err != nil {
			t.Errorf("%s: BatonJobOverdue on the instances' series: %v\n%s", name, err, out)
		} else {
			sc.note("info-rule", name, "BatonJobOverdue fires on the scraped series: %s", strings.TrimSpace(out))
		}
	}

	// 2. Every campaigning instance frozen; the standby alone reports.
	var standby *proc
	for _, p := range procs {
		if p.slot.standby {
			standby = p
			continue
		}
		p.mu.Lock()
		p.frozen = true
		p.mu.Unlock()
		_ = p.signal(syscall.SIGSTOP)
	}
	stopped := time.Now()
	sc.note("info-sigstop", name, "every campaigning node frozen")
	// The first poll that sees nobody lead reports it (the time since the
	// last poll that saw a leader): nobody leading shows by the lease's
	// expiry and one poll. The lease expires a TTL after the last
	// renewal; Consul reaps a session at twice its TTL.
	lease := ttl
	if strings.HasPrefix(name, "consul") {
		lease = 2 * ttl
	}
	bound = stopped.Add(lease + absencePoll + scrapeMargin)
	if !waitFor(time.Until(bound), func() bool { v, ok := scrape(standby, "baton_election_leaderless_seconds", ""); return ok && v > 0 }) {
		t.Errorf("%s: the standby %s does not report nobody leading %v after every campaigning node froze (TTL %v, poll %v)",
			name, standby.id, time.Since(stopped).Round(time.Millisecond), ttl, absencePoll)
	} else {
		sc.note("info-leaderless", standby.id, "nobody leading, reported %v after the freeze", time.Since(stopped).Round(time.Millisecond))
	}
	// beat's last tick run is at most its period before the freeze; the
	// next is due by the freeze plus a period, overdue a deadline later
	// (a leader that outlives the freeze by its TTL runs nothing then:
	// it is frozen).
	bound = stopped.Add(beatEvery + overdueDeadline + absencePoll + scrapeMargin)
	if !waitFor(time.Until(bound), func() bool { v, ok := scrape(standby, "baton_job_overdue", "beat"); return ok && v == 1 }) {
		t.Errorf("%s: the standby %s does not show beat overdue %v after the freeze", name, standby.id, time.Since(stopped).Round(time.Millisecond))
	} else {
		sc.note("info-overdue", standby.id, "beat overdue %v after the freeze", time.Since(stopped).Round(time.Millisecond))
	}
	for _, p := range procs {
		if p != standby {
			_ = p.signal(syscall.SIGCONT)
			p.mu.Lock()
			p.frozen = false
			p.mu.Unlock()
		}
	}
	_ = os.Remove(hangFile)
}

// absenceJobs is TestAbsenceMetrics' jobs file: TTL ttl; "hang", every
// 15 s, which hangs while the file hang exists; "beat", every 5 s; both
// with a deadline of 10 s.
func absenceJobs(be *backend, ttl time.Duration, runs, hang string) string {
	head := strings.Replace(electionHead(be), fmt.Sprintf("ttl: %v", be.ttl), fmt.Sprintf("ttl: %v", ttl), 1)
	return head + fmt.Sprintf(`  - name: hang
    schedule: "@every %[1]v"
    deadline: %[3]v
    command: |
      %[4]s
      if [ -e '%[5]s' ]; then exec sleep 600; fi
  - name: beat
    schedule: "@every %[2]v"
    deadline: %[3]v
    command: |
      %[4]s
`, hangEvery, beatEvery, overdueDeadline, runLine("S", runs, "-"), hang)
}

// scrape reads the value of metric name (of job, if not empty) on p's
// /metrics; ok is false if p does not answer or has no such series.
func scrape(p *proc, name, job string) (v float64, ok bool) {
	url := nodeURL(p)
	if url == "" {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	return metricValue(resp.Body, name, job)
}

// metricValue finds the series of name (with the label job="<job>" if
// job is not empty) in a Prometheus text exposition.
func metricValue(r io.Reader, name, job string) (float64, bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		if job != "" && !strings.Contains(rest, `job="`+job+`"`) {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		return v, err == nil
	}
	return 0, false
}

func TestMetricValue(t *testing.T) {
	text := `# HELP baton_job_overdue x
baton_job_overdue_total 7
baton_job_overdue{election="e2e",job="beat"} 0
baton_job_overdue{election="e2e",job="hang"} 1
baton_election_leaderless_seconds{election="e2e"} 12.5
`
	for _, c := range []struct {
		name, job string
		want      float64
		ok        bool
	}{
		{"baton_job_overdue", "hang", 1, true},
		{"baton_job_overdue", "beat", 0, true},
		{"baton_job_overdue", "nap", 0, false},
		{"baton_election_leaderless_seconds", "", 12.5, true},
		{"baton_leader", "", 0, false},
	} {
		if v, ok := metricValue(strings.NewReader(text), c.name, c.job); v != c.want || ok != c.ok {
			t.Errorf("%s{job=%q} = %v, %v; want %v, %v", c.name, c.job, v, ok, c.want, c.ok)
		}
	}
}
