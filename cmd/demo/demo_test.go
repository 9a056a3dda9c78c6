package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/envtest"
)

// The tests here run the demo binary as real processes. It is built once
// per test binary, into a temporary directory removed by TestMain.

var demoBin = envtest.Shared[string]{What: "go build ./cmd/demo", Dir: "baton-demo-test-", Fail: true,
	Start: func(dir string) (string, error) {
		bin := filepath.Join(dir, "demo")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			return "", fmt.Errorf("%v\n%s", err, out)
		}
		return bin, nil
	}}

func TestMain(m *testing.M) {
	code := m.Run()
	demoBin.Close()
	os.Exit(code)
}

// demoBinary returns the path of the demo binary, building it on first use.
func demoBinary(t *testing.T) string { return demoBin.Get(t) }

// repoRoot is the module root, two levels up from cmd/demo.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitExit waits up to within for exited to be closed and stops t
// (t.Fatal) with msg if it is not.
func waitExit(t *testing.T, exited <-chan struct{}, within time.Duration, msg string) {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(within):
		t.Fatal(msg)
	}
}

// event is one line of `demo cluster` output: a node's JSON log record or
// a line of the cluster itself.
type event struct {
	at      time.Time // when the test read it
	node    string    // "node-1"..., "" for the cluster's own lines
	cluster string    // the cluster's line, after "cluster: "
	raw     string

	// From a node's JSON record.
	time     time.Time
	msg      string
	identity string
	token    uint64
	job      string
	tick     string
	result   string
	pid      int
	http     string
}

var nodeLine = regexp.MustCompile(`^([\w.-]+) \| (.*)$`)

func parseEvent(line string, at time.Time) event {
	ev := event{at: at, raw: line}
	if s, ok := strings.CutPrefix(line, "cluster: "); ok {
		ev.cluster = s
		return ev
	}
	m := nodeLine.FindStringSubmatch(line)
	if m == nil {
		return ev
	}
	ev.node = m[1]
	var rec struct {
		Time     time.Time `json:"time"`
		Msg      string    `json:"msg"`
		Identity string    `json:"identity"`
		Token    uint64    `json:"token"`
		Job      string    `json:"job"`
		Tick     string    `json:"tick"`
		Result   string    `json:"result"`
		PID      int       `json:"pid"`
		HTTP     string    `json:"http"`
	}
	if json.Unmarshal([]byte(m[2]), &rec) == nil {
		ev.time, ev.msg, ev.identity, ev.token = rec.Time, rec.Msg, rec.Identity, rec.Token
		ev.job, ev.tick, ev.result, ev.pid, ev.http = rec.Job, rec.Tick, rec.Result, rec.PID, rec.HTTP
	}
	return ev
}

// cluster is a running `demo cluster` and everything it printed.
type cluster struct {
	t      *testing.T
	cmd    *exec.Cmd
	start  time.Time
	prefix string // put before each line read: "NAME | " for a lone node

	mu     sync.Mutex
	events []event
	grew   chan struct{} // closed and replaced when events grows
	closed bool          // output ended
	exited chan struct{}
	err    error // Wait's result
}

func startCluster(t *testing.T, args ...string) *cluster {
	t.Helper()
	return startProc(t, "", append([]string{"cluster"}, args...)...)
}

// startProc runs the demo binary with args; prefix is put before each line
// of its output (stdout and stderr) as if a cluster had printed it.
func startProc(t *testing.T, prefix string, args ...string) *cluster {
	t.Helper()
	return startProcEnv(t, prefix, nil, args...)
}

// startProcEnv is startProc with the environment env (nil: the test's).
func startProcEnv(t *testing.T, prefix string, env []string, args ...string) *cluster {
	t.Helper()
	bin := demoBinary(t)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = repoRoot(t)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	c := &cluster{t: t, cmd: cmd, prefix: prefix, grew: make(chan struct{}), exited: make(chan struct{})}
	c.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go c.read(out)
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-c.exited:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill() // the nodes stop when their stdin closes
				<-c.exited
			}
		}
		if t.Failed() {
			c.mu.Lock()
			defer c.mu.Unlock()
			var b strings.Builder
			for _, ev := range c.events {
				fmt.Fprintf(&b, "%s %s\n", ev.at.Format("15:04:05.000"), ev.raw)
			}
			t.Logf("cluster output:\n%s", b.String())
		}
	})
	return c
}

func (c *cluster) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ev := parseEvent(c.prefix+sc.Text(), time.Now())
		c.mu.Lock()
		c.events = append(c.events, ev)
		close(c.grew)
		c.grew = make(chan struct{})
		c.mu.Unlock()
	}
	err := c.cmd.Wait()
	c.mu.Lock()
	c.err = err
	c.closed = true
	close(c.grew)
	c.mu.Unlock()
	close(c.exited)
}

// waitFor returns the first event at index >= from that matches, waiting
// up to d. It fails the test on timeout.
func (c *cluster) waitFor(from int, d time.Duration, what string, match func(event) bool) (event, int) {
	c.t.Helper()
	deadline := time.After(d)
	for i := from; ; {
		c.mu.Lock()
		for ; i < len(c.events); i++ {
			if match(c.events[i]) {
				ev := c.events[i]
				c.mu.Unlock()
				return ev, i
			}
		}
		grew, closed := c.grew, c.closed
		c.mu.Unlock()
		if closed {
			c.t.Fatalf("waiting for %s: the cluster exited (%v)", what, c.err)
		}
		select {
		case <-grew:
		case <-deadline:
			c.t.Fatalf("no %s within %v", what, d)
		}
	}
}

func (c *cluster) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

func (c *cluster) snapshot() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event(nil), c.events...)
}

// pidOf returns the pid of node name, from its "node started" record.
func (c *cluster) pidOf(name string) int {
	c.t.Helper()
	ev, _ := c.waitFor(0, 30*time.Second, name+" started", func(ev event) bool { return ev.node == name && ev.msg == "node started" })
	return ev.pid
}

func isAcquired(ev event) bool { return ev.msg == "acquired leadership" }

// clusterJobs returns the absolute path of the jobs file the cluster
// tests give every node, testdata/cluster.yaml: a log job every second
// and a 2 s sleep job every five.
func clusterJobs(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCluster drives `demo cluster` with 3 nodes through the acceptance
// scenario of issue 3: a leader within 3 s running the jobs alone; kill -9
// of the leader and a new leader within TTL + 1 s; SIGTERM of the leader
// during a 2 s sleep job, the job finishing, and a new leader within 1 s;
// Ctrl-C stopping everything cleanly. Every run must come from the node
// leading at the time, and no tick may start twice (logs and ledger).
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and waits for failovers")
	}
	const ttl = 2 * time.Second
	cfg := clusterJobs(t)
	c := startCluster(t, "--nodes", "3", "--config", cfg, "--log-format", "json")

	// 1. A leader within 3 s, running the jobs.
	first, _ := c.waitFor(0, 30*time.Second, "a first leader", isAcquired)
	took := first.at.Sub(c.start)
	t.Logf("MEASURED first leader: %s after the cluster started (%v)", first.node, took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("first leader after %v, want within 3 s", took)
	}
	leader := first.node
	_, i := c.waitFor(0, 10*time.Second, "the cluster view of the leader", func(ev event) bool {
		return strings.HasPrefix(ev.cluster, "leader "+leader+" (pid ")
	})
	for range 3 {
		_, i = c.waitFor(i+1, 5*time.Second, "a tick run on the leader", func(ev event) bool {
			return ev.msg == "run ended" && ev.job == "tick"
		})
	}

	// 2. kill -9 of the leader: a new leader within TTL + 1 s.
	pid := c.pidOf(leader)
	mark := c.len()
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	next, _ := c.waitFor(mark, 15*time.Second, "a leader after kill -9", isAcquired)
	failover := next.time.Sub(killed)
	t.Logf("MEASURED kill -9 of %s (pid %d): %s leads after %v (bound TTL + 1s = %v)", leader, pid, next.node, failover.Round(time.Millisecond), ttl+time.Second)
	if failover > ttl+time.Second {
		t.Errorf("new leader %v after kill -9, want within TTL + 1s = %v", failover, ttl+time.Second)
	}
	c.waitFor(mark, 5*time.Second, "the exit of the killed node", func(ev event) bool {
		return strings.HasPrefix(ev.cluster, fmt.Sprintf("%s (pid %d) exited: signal: killed", leader, pid))
	})
	leader = next.node

	// 3. kill -TERM during a sleep job: the job finishes, then a follower
	// leads within 1 s.
	napStart, j := c.waitFor(mark, 15*time.Second, "a nap run on "+leader, func(ev event) bool {
		return ev.node == leader && ev.msg == "run started" && ev.job == "nap"
	})
	pid = c.pidOf(leader)
	termAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	napEnd, _ := c.waitFor(j, 10*time.Second, "the end of the nap run", func(ev event) bool {
		return ev.node == leader && ev.msg == "run ended" && ev.job == "nap" && ev.tick == napStart.tick
	})
	if napEnd.result != "ok" {
		t.Errorf("the nap run interrupted by SIGTERM ended with %q, want ok (it must finish)", napEnd.result)
	}
	if napEnd.time.Before(termAt) {
		t.Errorf("the nap run ended at %v, before the SIGTERM at %v: not a drain", napEnd.time, termAt)
	}
	released, _ := c.waitFor(j, 10*time.Second, "the release", func(ev event) bool {
		return ev.node == leader && ev.msg == "released leadership"
	})
	third, _ := c.waitFor(j, 10*time.Second, "a leader after SIGTERM", func(ev event) bool {
		return isAcquired(ev) && ev.node != leader
	})
	handover := third.time.Sub(napEnd.time)
	t.Logf("MEASURED kill -TERM of %s during nap: nap ran %v and ended ok %v after SIGTERM; %s leads %v after the nap ended (%v after the release)",
		leader, napEnd.time.Sub(napStart.time).Round(time.Millisecond), napEnd.time.Sub(termAt).Round(time.Millisecond), third.node,
		handover.Round(time.Millisecond), third.time.Sub(released.time).Round(time.Millisecond))
	if handover > time.Second {
		t.Errorf("new leader %v after the job finished, want within 1 s", handover)
	}
	c.waitFor(j, 10*time.Second, "a clean exit of the stopped node", func(ev event) bool {
		return strings.HasPrefix(ev.cluster, fmt.Sprintf("%s (pid %d) exited: exit status 0", leader, pid))
	})
	leader = third.node
	// The cluster view follows: one line per change, with pid and token.
	view := fmt.Sprintf("leader %s (pid %d) token %d", leader, c.pidOf(leader), third.token)
	c.waitFor(j, 5*time.Second, "the cluster view line "+strconv.Quote(view), func(ev event) bool { return ev.cluster == view })
	c.waitFor(c.len(), 5*time.Second, "a tick run on the last node", func(ev event) bool {
		return ev.node == leader && ev.msg == "run ended" && ev.job == "tick"
	})

	// The ledger as `demo history` shows it: no tick twice.
	ep := ""
	for _, ev := range c.snapshot() {
		if s, ok := strings.CutPrefix(ev.cluster, "etcd "); ok {
			ep = strings.Fields(s)[0]
		}
	}
	hist, err := exec.Command(demoBinary(t), "history", "--endpoints", ep, "--election", "demo", "--config", cfg, "-n", "100").CombinedOutput()
	if err != nil {
		t.Fatalf("demo history: %v\n%s", err, hist)
	}
	checkHistory(t, string(hist))

	// 4. Ctrl-C: the last node drains and exits 0, then the cluster.
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitExit(t, c.exited, 40*time.Second, "the cluster did not exit within 40 s of SIGINT")
	if c.err != nil {
		t.Errorf("cluster exit: %v, want 0", c.err)
	}
	c.waitFor(0, time.Second, "the stop of the last node", func(ev event) bool {
		return strings.HasPrefix(ev.cluster, leader+" (pid ") && strings.HasSuffix(ev.cluster, "exited: exit status 0")
	})

	checkRuns(t, c.snapshot(), map[string]time.Time{first.node: killed})
}

// checkRuns checks, over the whole output, that every run started on a
// node that was leading with the run's token, that terms did not overlap,
// and that no (job, tick) started twice. killedAt gives the end of the term
// of nodes killed with SIGKILL.
//
// A graceful term ends, for starting runs, at its "drained" line: the node
// starts nothing after it (checked), and it comes before the release. Its
// "released leadership" line is logged after the release call returns,
// which on a loaded machine can come after the next leader's "acquired
// leadership": that order says nothing about the terms.
func checkRuns(t *testing.T, evs []event, killedAt map[string]time.Time) {
	t.Helper()
	type term struct {
		node       string
		token      uint64
		start, end time.Time
		drained    time.Time // the graceful drain finished: no start after it
	}
	var terms []*term
	cur := map[string]*term{}
	started := map[string]string{}
	runs := 0
	for _, ev := range evs {
		if ev.node == "" || ev.msg == "" {
			continue
		}
		switch ev.msg {
		case "acquired leadership":
			if tm := cur[ev.node]; tm != nil && tm.token == ev.token {
				continue // a backend may log it too
			}
			tm := &term{node: ev.node, token: ev.token, start: ev.time}
			cur[ev.node] = tm
			terms = append(terms, tm)
		case "drained":
			if tm := cur[ev.node]; tm != nil && tm.token == ev.token {
				tm.drained = ev.time
			}
		case "released leadership", "lost leadership":
			if tm := cur[ev.node]; tm != nil {
				tm.end = ev.time
			}
			delete(cur, ev.node)
		case "run started":
			runs++
			tm := cur[ev.node]
			if tm == nil || tm.token != ev.token {
				t.Errorf("%s started %s/%s with token %d while not leading with it: %s", ev.node, ev.job, ev.tick, ev.token, ev.raw)
			} else if !tm.drained.IsZero() {
				t.Errorf("%s started %s/%s with token %d after its term drained: %s", ev.node, ev.job, ev.tick, ev.token, ev.raw)
			}
			key := ev.job + "@" + ev.tick
			if other, dup := started[key]; dup {
				t.Errorf("tick %s started twice: by %s and %s", key, other, ev.node)
			}
			started[key] = ev.node
		}
	}
	for node, at := range killedAt {
		for _, tm := range terms {
			if tm.node == node && tm.end.IsZero() {
				tm.end = at
			}
		}
	}
	for i := 1; i < len(terms); i++ {
		prev, next := terms[i-1], terms[i]
		if next.token <= prev.token {
			t.Errorf("term of %s has token %d, not above the previous term's %d", next.node, next.token, prev.token)
		}
		end := prev.end
		if !prev.drained.IsZero() {
			end = prev.drained
		}
		if end.IsZero() || next.start.Before(end) {
			t.Errorf("terms overlap: %s (token %d) %v..%v and %s (token %d) from %v",
				prev.node, prev.token, prev.start, prev.end, next.node, next.token, next.start)
		}
	}
	if runs < 5 || len(terms) != 3 {
		t.Errorf("saw %d runs in %d terms, want at least 5 runs in 3 terms", runs, len(terms))
	}
	t.Logf("%d runs in %d terms, each by the node leading at the time", runs, len(terms))
}

// checkHistory checks `demo history` output: a header, rows, and no
// (job, tick) twice.
func checkHistory(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "JOB") {
		t.Fatalf("demo history printed:\n%s", out)
	}
	seen := map[string]bool{}
	instances := map[string]bool{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 7 {
			t.Errorf("history row %q", l)
			continue
		}
		key := f[0] + "@" + f[1]
		if !strings.HasPrefix(f[3], "node-") {
			t.Errorf("history row %q: instance %q", l, f[3])
		}
		if seen[key] {
			t.Errorf("history shows tick %s twice:\n%s", key, out)
		}
		seen[key] = true
		instances[f[3]] = true
	}
	if len(instances) < 2 {
		t.Errorf("history shows runs by %d instances, want the first two leaders at least:\n%s", len(instances), out)
	}
	t.Logf("demo history: %d runs by %d instances, no tick twice:\n%s", len(lines)-1, len(instances), out)
}

// TestCluster_EtcdctlElect runs the pinned etcdctl against a demo cluster:
// `etcdctl elect -l PREFIX` prints the leader's JSON and follows a change.
func TestCluster_EtcdctlElect(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	etcdctl := filepath.Join(repoRoot(t), ".bin", "etcdctl")
	if _, err := os.Stat(etcdctl); err != nil {
		if os.Getenv("BATON_TEST_REQUIRE") == "1" {
			t.Fatalf("%s missing (BATON_TEST_REQUIRE=1): run make tools", etcdctl)
		}
		t.Skipf("SKIP: %s missing: run `make tools` (set BATON_TEST_REQUIRE=1 to fail instead)", etcdctl)
	}
	cfg := clusterJobs(t)
	c := startCluster(t, "--nodes", "2", "--config", cfg, "--log-format", "json")
	first, _ := c.waitFor(0, 30*time.Second, "a first leader", isAcquired)
	ep := ""
	for _, ev := range c.snapshot() {
		if s, ok := strings.CutPrefix(ev.cluster, "etcd "); ok {
			ep = strings.Fields(s)[0]
		}
	}
	// The banner's command, verbatim.
	var banner string
	for _, ev := range c.snapshot() {
		if s, ok := strings.CutPrefix(ev.cluster, "watch the leader:"); ok {
			banner = strings.TrimSpace(s)
		}
	}
	want := fmt.Sprintf(".bin/etcdctl --endpoints %s elect -l /baton/elections/demo", ep)
	if banner != want {
		t.Errorf("banner command %q, want %q", banner, want)
	}

	cmd := exec.Command(etcdctl, "--endpoints", ep, "elect", "-l", "/baton/elections/demo")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	ids := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var v struct {
				ID  string `json:"id"`
				PID int    `json:"pid"`
			}
			if json.Unmarshal(sc.Bytes(), &v) == nil && v.ID != "" {
				ids <- v.ID + " " + strconv.Itoa(v.PID)
			}
		}
		close(ids)
	}()
	pid := c.pidOf(first.node)
	next := func(what string) string {
		select {
		case s, ok := <-ids:
			if !ok {
				t.Fatalf("etcdctl elect -l ended before %s", what)
			}
			return s
		case <-time.After(10 * time.Second):
			t.Fatalf("etcdctl elect -l printed no %s within 10 s", what)
		}
		return ""
	}
	if got, want := next("leader"), fmt.Sprintf("%s %d", first.node, pid); got != want {
		t.Errorf("etcdctl elect -l printed leader %q, want %q", got, want)
	}
	mark := c.len()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	second, _ := c.waitFor(mark, 15*time.Second, "a new leader", func(ev event) bool { return isAcquired(ev) && ev.node != first.node })
	if got, want := next("change of leader"), fmt.Sprintf("%s %d", second.node, c.pidOf(second.node)); got != want {
		t.Errorf("after the handover etcdctl elect -l printed %q, want %q", got, want)
	}
	t.Logf("etcdctl elect -l followed %s -> %s", first.node, second.node)
}

// TestBadJobsFile: a bad jobs file makes `demo node` and `demo cluster`
// exit with status 1 and one line naming the file, the line and the field.
func TestBadJobsFile(t *testing.T) {
	bin := demoBinary(t)
	const head = "election:\n  ttl: 2s\njobs:\n"
	for _, tc := range []struct {
		name, sub, yaml, want string
	}{
		{"unknown field", "node", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    retry: 3\n",
			`:7: jobs[0].retry: unknown field (want one of name, schedule, builtin, duration, command, http, timeout, overlap, misfire, misfire_grace, max_catch_up, retries, retry_backoff, retry_backoff_max, jitter, deadline)`},
		{"bad cron spec", "node", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n  - name: b\n    schedule: '*/5 * * *'\n    command: date\n",
			`:8: jobs[1].schedule: "*/5 * * *": expected 5 to 6 fields, found 4: [*/5 * * *]`},
		{"missing command", "node", head + "  - name: a\n    schedule: '@every 1s'\n    timeout: 5s\n",
			`:4: jobs[0].command: required: set command (run with /bin/sh -c), http (a request to your service) or builtin (sleep, log, fail)`},
		{"negative timeout", "node", head + "  - name: a\n    schedule: '@every 1s'\n    command: date\n    timeout: -5s\n",
			`:7: jobs[0].timeout: "-5s": must not be negative`},
		{"unknown field, cluster", "cluster", "election:\n  ttl: 2s\n  grace: 1s\njobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n",
			`:3: election.grace: unknown field (want one of name, ttl, renew_interval, safety_margin, retry_period, release_timeout, shutdown_timeout, kill_grace, poll_interval)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "jobs.yaml", tc.yaml)
			cmd := exec.Command(bin, tc.sub, "--config", path)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errorsAs(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1; stderr:\n%s", err, stderr.String())
			}
			if got, want := stderr.String(), path+tc.want+"\n"; got != want {
				t.Errorf("stderr:\n got %q\nwant %q", got, want)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %q, want nothing (nothing started)", stdout.String())
			}
		})
	}
}

func errorsAs(err error, target **exec.ExitError) bool {
	ee, ok := err.(*exec.ExitError)
	if ok {
		*target = ee
	}
	return ok
}

var waitUntil = envtest.WaitUntil
