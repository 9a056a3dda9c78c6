package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/etcdtest"
)

// With Redis down, `baton run` prints its own error only: go-redis's raw
// pool lines ("redis: 2026/11/26 18:39:56 pool.go:...") do not come
// before it.
func TestRun_RedisDownPrintsOneError(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, dir, "baton.yaml", fmt.Sprintf(`election:
  name: startup-test
backend:
  kind: redis
  redis_addr: %s
node:
  http: ""
jobs:
  - {name: a, schedule: "@every 1m", http: {url: "http://127.0.0.1:1/"}}
`, freeAddr(t)))
	_, errOut, code := runBaton(t, "run", "--config", cfg)
	if code != 1 || !strings.HasPrefix(errOut, "baton run: redis key ") || strings.Contains(errOut, "pool.go") {
		t.Errorf("baton run with Redis down: status %d, want 1 and baton's error alone:\n%s", code, errOut)
	}
}

// With the API server unreachable, baton run on the kube backend fails at
// start with the check's error, naming the Lease: its ledger and control
// store are there, so the run is not refused, but nothing runs until the
// server answers.
func TestRun_KubeServerDownFailsAtStart(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, dir, "baton.yaml", `election:
  name: startup-test
backend:
  kind: kube
  kube_server: https://127.0.0.1:1
jobs:
  - {name: a, schedule: "@every 1m", command: "true"}
`)
	_, errOut, code := runBaton(t, "run", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "kube Lease default/startup-test") || !strings.Contains(errOut, "kube: check:") {
		t.Errorf("baton run on kube with the server down: status %d, want 1 and the check's error:\n%s", code, errOut)
	}
}

// baton run on the kube backend, as real processes on a real
// kube-apiserver: one of two instances leads and runs a command job every
// second, with its term's token; on SIGTERM it drains and releases, and
// the other leads with a higher token at once. No tick runs twice, and
// the Lease names the holder.
func TestRun_Kube(t *testing.T) {
	srv, dir, tokenFile := kubeServer(t)
	runs := filepath.Join(dir, "runs")
	cfg := write(t, dir, "baton.yaml", fmt.Sprintf(`election:
  name: kube-run-test
  ttl: 3s
  shutdown_timeout: 5s
backend:
  kind: kube
  kube_server: %s
  kube_token_file: %s
  kube_cacert: %s
node:
  http: ""
jobs:
  - name: tick
    schedule: "@every 1s"
    command: 'echo "$BATON_TICK $BATON_TOKEN $BATON_INSTANCE" >> %s'
`, srv.URL, tokenFile, srv.CAFile, runs))
	start := func(id string) *exec.Cmd {
		var logs envtest.Buffer
		cmd := exec.Command(batonBinary(t), "run", "--config", cfg, "--id", id)
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("%s's log:\n%s", id, logs.String())
			}
		})
		return cmd
	}
	read := func() (ticks map[string]int, tokens map[string]uint64) {
		ticks, tokens = map[string]int{}, map[string]uint64{}
		raw, _ := os.ReadFile(runs)
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			f := strings.Fields(l)
			if len(f) != 3 {
				continue
			}
			ticks[f[0]]++
			tok, _ := strconv.ParseUint(f[1], 10, 64)
			tokens[f[2]] = max(tokens[f[2]], tok)
		}
		return ticks, tokens
	}
	a := start("run-a")
	if !waitUntil(20*time.Second, func() bool { _, tok := read(); return tok["run-a"] > 0 }) {
		t.Fatal("run-a never ran the job")
	}
	if who := leaseHolder(t, srv, "kube-run-test"); who != "run-a" {
		t.Errorf("the Lease's holderIdentity is %q, want run-a", who)
	}
	b := start("run-b")
	time.Sleep(2 * time.Second) // b follows; a runs on
	a.Process.Signal(syscall.SIGTERM)
	if err := a.Wait(); err != nil {
		t.Errorf("run-a after SIGTERM: %v, want a clean exit", err)
	}
	if !waitUntil(10*time.Second, func() bool { _, tok := read(); return tok["run-b"] > 0 }) {
		t.Fatal("run-b never ran the job after run-a stopped")
	}
	time.Sleep(2 * time.Second)
	b.Process.Signal(syscall.SIGTERM)
	b.Wait()
	ticks, tokens := read()
	for tick, n := range ticks {
		if n > 1 {
			t.Errorf("tick %s ran %d times", tick, n)
		}
	}
	if tokens["run-b"] <= tokens["run-a"] {
		t.Errorf("tokens: run-a %d, then run-b %d: not rising", tokens["run-a"], tokens["run-b"])
	}
	t.Logf("%d ticks run, tokens %v", len(ticks), tokens)
}

// The application health gate, with real processes: `baton run` sidecars
// built from this package, on embedded etcd, each beside a Python app
// (testdata/app.py) that records the calls it gets.

// gateApp is one app process on a fixed port, restartable on that port.
type gateApp struct {
	t     *testing.T
	port  int
	calls string // the app's record of job calls
	sick  string // while this file exists, GET /healthz answers 503
	cmd   *exec.Cmd
}

func newGateApp(t *testing.T, dir string, i int) *gateApp {
	t.Helper()
	addr := freeAddr(t)
	port, _ := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	a := &gateApp{t: t, port: port, calls: filepath.Join(dir, fmt.Sprintf("calls-%d.log", i)), sick: filepath.Join(dir, fmt.Sprintf("sick-%d", i))}
	t.Cleanup(a.stop)
	return a
}

// start starts the app and waits until it listens.
func (a *gateApp) start() {
	a.t.Helper()
	cmd := exec.Command("python3", "testdata/app.py", strconv.Itoa(a.port), a.calls, a.sick)
	out, err := cmd.StdoutPipe()
	if err != nil {
		a.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		a.t.Fatalf("app: %v", err)
	}
	a.cmd = cmd
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		a.t.Fatalf("app on port %d did not start: %q %v", a.port, line, err)
	}
}

// setSick makes GET /healthz answer 503 (true) or 200 (false).
func (a *gateApp) setSick(sick bool) {
	a.t.Helper()
	var err error
	if sick {
		err = os.WriteFile(a.sick, nil, 0o644)
	} else {
		err = os.Remove(a.sick)
	}
	if err != nil {
		a.t.Fatal(err)
	}
}

// stop kills the app (SIGKILL: it stops answering at once).
func (a *gateApp) stop() {
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Kill()
	_ = a.cmd.Wait()
	a.cmd = nil
}

// appCall is one line of an app's record.
type appCall struct {
	job, tick, instance, kind string
	token                     uint64
	at                        time.Time
}

func (a *gateApp) read() []appCall {
	b, err := os.ReadFile(a.calls)
	if err != nil {
		return nil
	}
	var out []appCall
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 6 {
			continue
		}
		tok, _ := strconv.ParseUint(f[2], 10, 64)
		ns, _ := strconv.ParseInt(f[5], 10, 64)
		out = append(out, appCall{job: f[0], tick: f[1], token: tok, instance: f[3], kind: f[4], at: time.Unix(0, ns)})
	}
	return out
}

// callsSince returns the calls the app got at or after from.
func (a *gateApp) callsSince(from time.Time) []appCall {
	var out []appCall
	for _, c := range a.read() {
		if !c.at.Before(from) {
			out = append(out, c)
		}
	}
	return out
}

// gateSidecar is one `baton run` process.
type gateSidecar struct {
	id, http string
	cmd      *exec.Cmd
	logs     bytes.Buffer
	logMu    sync.Mutex
	exited   chan error
}

// gateConfig is a sidecar's config file: etcd, one HTTP job each second
// to its app, and extra appended at the top level.
func gateConfig(t *testing.T, dir, endpoint string, i int, app *gateApp, extra string) (path, httpAddr string) {
	httpAddr = freeAddr(t)
	path = write(t, dir, fmt.Sprintf("baton-%d.yaml", i), fmt.Sprintf(`election:
  name: appgate
  ttl: 2s
  retry_period: 500ms
  shutdown_timeout: 3s
backend:
  kind: etcd
  endpoints: [%s]
node:
  http: %s
  step_down_cooldown: 2s
jobs:
  - name: tick
    schedule: "* * * * * *"
    http: {url: "http://127.0.0.1:%d/jobs/tick"}
    timeout: 2s
    misfire: run-once
    misfire_grace: 2m
%s`, endpoint, httpAddr, app.port, extra))
	return path, httpAddr
}

func startSidecar(t *testing.T, id, cfg, httpAddr string) *gateSidecar {
	t.Helper()
	s := &gateSidecar{id: id, http: httpAddr, exited: make(chan error, 1)}
	s.cmd = exec.Command(batonBinary(t), "run", "--config", cfg, "--id", id)
	s.cmd.Stdout, s.cmd.Stderr = &lockedWriter{&s.logs, &s.logMu}, &lockedWriter{&s.logs, &s.logMu}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		envtest.Terminate(s.cmd.Process, s.exited, 20*time.Second)
		if t.Failed() {
			s.logMu.Lock()
			t.Logf("%s output:\n%s", id, s.logs.String())
			s.logMu.Unlock()
		}
	})
	return s
}

// status is the sidecar's GET /status; ok is false when it does not
// answer.
func (s *gateSidecar) status() (st httpapi.Status, ok bool) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + s.http + "/status")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st) == nil
}

func (s *gateSidecar) leading() bool {
	st, ok := s.status()
	return ok && st.Leading
}

func (s *gateSidecar) role() string {
	st, _ := s.status()
	return st.Role
}

// startGatePair starts two apps, each with its sidecar on srv; extra
// gives the config's top-level addition for an app ("" for none).
func startGatePair(t *testing.T, extra func(a *gateApp) string) ([]*gateApp, []*gateSidecar) {
	t.Helper()
	srv := etcdtest.Start(t)
	dir := t.TempDir()
	apps := []*gateApp{newGateApp(t, dir, 1), newGateApp(t, dir, 2)}
	var cars []*gateSidecar
	for i, a := range apps {
		a.start()
		cfg, addr := gateConfig(t, dir, srv.Endpoint(), i+1, a, extra(a))
		cars = append(cars, startSidecar(t, fmt.Sprintf("sidecar-%d", i+1), cfg, addr))
	}
	return apps, cars
}

// waitGateLeader waits for one of the pair to lead.
func waitGateLeader(t *testing.T, cars []*gateSidecar) (leader, other int) {
	t.Helper()
	envtest.WaitFor(t, 60*time.Second, "a leader", func() bool {
		for i, s := range cars {
			if s.leading() {
				leader, other = i, 1-i
				return true
			}
		}
		return false
	})
	return leader, other
}

func gateSkip(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd and processes")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		envtest.Unavailable(t, "python3 (the app beside the sidecars): %v", err)
	}
}

// With the leader's application stopped, its sidecar steps down and the
// instance whose application answers leads and runs the ticks. The
// sidecars have no app section: their HTTP job's endpoint (TCP connect)
// is the check, 3 failures 1 s apart.
func TestRun_LeadersAppStops_HealthyInstanceLeads(t *testing.T) {
	gateSkip(t)
	apps, cars := startGatePair(t, func(*gateApp) string { return "" })
	leader, other := waitGateLeader(t, cars)
	start := time.Now()
	envtest.WaitFor(t, 10*time.Second, "a tick at the leader's app", func() bool { return len(apps[leader].callsSince(start)) > 0 })

	killed := time.Now()
	apps[leader].stop()
	const bound = 15 * time.Second // 3 checks 1 s apart, a drain, a release, an etcd watch; margin for a loaded machine
	if !waitUntil(bound, cars[other].leading) {
		t.Fatalf("%s did not lead within %v of the kill of %s's app: %s's role is %q",
			cars[other].id, bound, cars[leader].id, cars[leader].id, cars[leader].role())
	}
	took := time.Since(killed)
	envtest.WaitFor(t, 10*time.Second, "a tick at the healthy instance's app", func() bool {
		for _, c := range apps[other].callsSince(killed) {
			if c.instance == cars[other].id {
				return true
			}
		}
		return false
	})
	st, _ := cars[leader].status()
	if st.Leading || st.Eligible || !strings.Contains(st.NotEligible, "app unhealthy: tcp 127.0.0.1:") ||
		!strings.Contains(st.NotEligible, "connection refused") {
		t.Errorf("%s after its app stopped: leading %v, eligible %v, not_eligible %q", cars[leader].id, st.Leading, st.Eligible, st.NotEligible)
	}
	if st.App == nil || st.App.Healthy {
		t.Errorf("%s: /status app %+v, want unhealthy", cars[leader].id, st.App)
	}
	t.Logf("the app of %s killed; %s led %v later", cars[leader].id, cars[other].id, took.Round(time.Millisecond))
}

// A sidecar started before its application does not lead until the
// application answers, and says why; then it leads and runs the ticks.
// No app section: the HTTP job's endpoint (TCP connect) is the check.
func TestRun_SidecarBeforeItsApp_LeadsOnceTheAppAnswers(t *testing.T) {
	gateSkip(t)
	srv := etcdtest.Start(t)
	dir := t.TempDir()
	app := newGateApp(t, dir, 1)
	cfg, addr := gateConfig(t, dir, srv.Endpoint(), 1, app, "")
	car := startSidecar(t, "sidecar-1", cfg, addr)
	envtest.WaitFor(t, 60*time.Second, "the sidecar's /status", func() bool { _, ok := car.status(); return ok })
	// Alone in the election: it would lead within moments if it
	// campaigned. Watch it for 5 s.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if st, ok := car.status(); ok && (st.Leading || st.Leader != nil) {
			t.Fatalf("the sidecar leads (role %q, leader %+v) although its app never answered", st.Role, st.Leader)
		}
	}
	st, _ := car.status()
	want := fmt.Sprintf("app unhealthy: tcp 127.0.0.1:%d: connection refused (", app.port)
	if st.Eligible || st.Role != "app unhealthy" || !strings.HasPrefix(st.NotEligible, want) {
		t.Errorf("before its app: eligible %v, role %q, not_eligible %q, want it to start with %q", st.Eligible, st.Role, st.NotEligible, want)
	}
	out, errOut, code := runBaton(t, "status", "--node", "http://"+addr)
	if code != 0 || !strings.Contains(out, "not eligible:") || !strings.Contains(out, want) {
		t.Errorf("baton status does not say why it is not eligible: status %d\n%s%s", code, out, errOut)
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz of the sidecar itself: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	started := time.Now()
	app.start()
	if !waitUntil(15*time.Second, car.leading) {
		t.Fatalf("not leading within 15 s of its app's start: role %q", car.role())
	}
	took := time.Since(started)
	envtest.WaitFor(t, 10*time.Second, "a tick at the app", func() bool { return len(app.callsSince(started)) > 0 })
	t.Logf("led %v after its app started", took.Round(time.Millisecond))
}

// When every application is down nobody leads and nobody campaigns (no
// term starts while they are down), and when one comes back its sidecar
// leads and catches the missed ticks up by the misfire policy (run-once:
// one catch-up run). The check is the app section's health URL.
func TestRun_AllAppsDown_NobodyLeadsThenCatchUp(t *testing.T) {
	gateSkip(t)
	apps, cars := startGatePair(t, func(a *gateApp) string {
		return fmt.Sprintf("app:\n  health_url: http://127.0.0.1:%d/healthz\n  interval: 500ms\n  timeout: 500ms\n  unhealthy_after: 3\n  healthy_after: 2\n", a.port)
	})
	waitGateLeader(t, cars)
	start := time.Now()
	envtest.WaitFor(t, 10*time.Second, "a tick", func() bool {
		return len(apps[0].callsSince(start))+len(apps[1].callsSince(start)) > 0
	})

	for _, a := range apps {
		a.stop()
	}
	down := time.Now()
	nobody := func() bool {
		for _, s := range cars {
			st, ok := s.status()
			if !ok || st.Leading || st.Leader != nil || st.Eligible {
				return false
			}
		}
		return true
	}
	if !waitUntil(15*time.Second, nobody) {
		st0, _ := cars[0].status()
		st1, _ := cars[1].status()
		t.Fatalf("someone still leads or is eligible 15 s after every app stopped: %s %q %q, %s %q %q",
			cars[0].id, st0.Role, st0.NotEligible, cars[1].id, st1.Role, st1.NotEligible)
	}
	quiet := time.Now()
	t.Logf("nobody leads %v after every app stopped", quiet.Sub(down).Round(time.Millisecond))
	// 8 s with every app down: nobody leads at any poll.
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, s := range cars {
			if st, ok := s.status(); ok && (st.Leading || st.Leader != nil) {
				t.Fatalf("%s: a leader with every app down: role %q, leader %+v", s.id, st.Role, st.Leader)
			}
		}
	}
	back := time.Now()
	apps[1].start()
	if !waitUntil(15*time.Second, cars[1].leading) {
		t.Fatalf("%s did not lead within 15 s of its app's return: role %q", cars[1].id, cars[1].role())
	}
	t.Logf("%s led %v after its app came back", cars[1].id, time.Since(back).Round(time.Millisecond))
	envtest.WaitFor(t, 10*time.Second, "the catch-up run of the ticks missed while nobody led", func() bool {
		for _, c := range apps[1].callsSince(back) {
			if c.kind == "catch-up" {
				return true
			}
		}
		return false
	})
	// No term began while every app was down: the recorded terms started
	// before the apps stopped or after one came back.
	time.Sleep(2 * time.Second) // a flapping leader would start another term
	st, _ := cars[1].status()
	after := 0
	for _, tm := range st.Terms {
		t.Logf("term %d: %s, %s to %s, %s", tm.Token, tm.Instance, tm.Started.Format("15:04:05.000"), tm.Ended.Format("15:04:05.000"), tm.How)
		if tm.Started.After(down) && tm.Started.Before(back) {
			t.Errorf("term %d of %s began at %s, after every app stopped and before one came back", tm.Token, tm.Instance, tm.Started)
		}
		if tm.Started.After(back) {
			after++
		}
	}
	if after != 1 {
		t.Errorf("%d terms began after the app came back, want 1", after)
	}
	var catchUps int
	for _, c := range apps[1].callsSince(back) {
		if c.kind == "catch-up" {
			catchUps++
		}
	}
	if catchUps != 1 {
		t.Errorf("catch-up runs after the outage: %d, want 1 (misfire run-once)", catchUps)
	}
	t.Logf("terms begun after the return: %d; catch-up runs: %d", after, catchUps)
}

// Hysteresis, end to end: health check failures shorter than
// unhealthy_after checks (5 blips of 400 ms, checks 500 ms apart, 3 to go
// down) change nothing: the same term leads throughout. A health URL that
// keeps failing (503) makes the leader step down, and the other instance
// leads.
func TestRun_HealthBlips_NoFlapping(t *testing.T) {
	gateSkip(t)
	apps, cars := startGatePair(t, func(a *gateApp) string {
		return fmt.Sprintf("app:\n  health_url: http://127.0.0.1:%d/healthz\n  interval: 500ms\n  unhealthy_after: 3\n  healthy_after: 2\n", a.port)
	})
	leader, other := waitGateLeader(t, cars)
	st, _ := cars[leader].status()
	token := st.Term.Token
	for i := 0; i < 5; i++ {
		apps[leader].setSick(true)
		time.Sleep(400 * time.Millisecond)
		apps[leader].setSick(false)
		time.Sleep(1500 * time.Millisecond)
		st, ok := cars[leader].status()
		if !ok || !st.Leading || st.Term.Token != token {
			t.Fatalf("blip %d of 400 ms: %s leading %v, term %+v, want token %d still", i+1, cars[leader].id, st.Leading, st.Term, token)
		}
	}
	if st, _ := cars[other].status(); st.Leading || !st.Eligible {
		t.Errorf("%s: leading %v, eligible %v after the blips", cars[other].id, st.Leading, st.Eligible)
	}

	sick := time.Now()
	apps[leader].setSick(true)
	if !waitUntil(15*time.Second, cars[other].leading) {
		t.Fatalf("%s did not lead within 15 s of %s's health URL answering 503: %s's role is %q",
			cars[other].id, cars[leader].id, cars[leader].id, cars[leader].role())
	}
	t.Logf("%s led %v after %s's health URL began to answer 503", cars[other].id, time.Since(sick).Round(time.Millisecond), cars[leader].id)
	st, _ = cars[leader].status()
	if want := "app unhealthy: GET http://127.0.0.1:" + strconv.Itoa(apps[leader].port) + "/healthz: HTTP 503 ("; st.Leading || !strings.HasPrefix(st.NotEligible, want) {
		t.Errorf("%s: leading %v, not_eligible %q, want it to start with %q", cars[leader].id, st.Leading, st.NotEligible, want)
	}
}
