package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton/e2e/internal/history"
	"github.com/batonhq/baton/internal/envtest"
)

// failFirst is how many attempts of each tick of the job "flaky" the app
// answers with 500; the job's retries (2) make the third one succeed.
const failFirst = 2

// TestSidecar runs the fault scenario with `baton run` sidecars and no Go
// job code: each node is a sidecar beside an instance of a small Python
// HTTP service (testdata/app.py), its backend and jobs in its config file.
// The sidecars' HTTP jobs are the fault suite's jobs (the app writes the
// same run log, so the same checker reads it: no duplicate, no overlap,
// no run outside its term, graceful terms drained, every tick run or
// accounted for, no two terms' runs at the same time), plus "flaky",
// which the app fails twice per tick: each attempt must reach the app
// exactly once, all under one token; and "slow", whose endpoint ignores
// the disconnect and fences its side effect with the token. Faults:
// SIGTERM of the leading sidecar while a request is in flight (the
// request completes before the handover: the drain check), kill -9 of
// the leading sidecar, a partition, and the leader's app killed
// (appstop_test.go).
func TestSidecar(t *testing.T) {
	skipUnlessLong(t, "starts servers and processes")
	if _, err := exec.LookPath("python3"); err != nil {
		envtest.Unavailable(t, "python3 (the app beside the sidecars): %v", err)
	}
	seed := envSeed(t)
	names := strings.Split(envtest.Getenv("BATON_E2E_BACKENDS", "etcd,postgres,mysql,consul,redis"), ",")
	var mu sync.Mutex
	var summaries []string
	t.Run("backends", func(t *testing.T) {
		for _, name := range names {
			name = strings.TrimSpace(name)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s, _ := runScenario(t, name, profile{name: "short"}, seed, variant{label: "sidecar", sidecar: true,
					plan: []string{fTermLeader, fKillLeader, fPartition, fAppStop}})
				mu.Lock()
				summaries = append(summaries, s)
				mu.Unlock()
			})
		}
	})
	sort.Strings(summaries)
	fmt.Printf("e2e sidecar summary (seed %d):\n%s", seed, strings.Join(summaries, ""))
}

// sidecar is the apps beside the sidecars of a scenario: one per node
// slot, kept across the restarts of its sidecar, as a service instance
// outlives its sidecar's crash.
type sidecar struct {
	mu      sync.Mutex
	configs map[int]string // slot → config file
	apps    map[int]*app   // slot → its app
	// appDown are the ticks of a leader's term while its app was down
	// (fAppStop): failed, and accounted for by the checker as such.
	appDown []history.Misfire
	// stops says, for each app stopped under its leader, what followed.
	stops []string
}

// app is the process of one slot's app and the port it listens on.
type app struct {
	port int
	stop func() // kills it and waits for it; once
}

// sidecarConfig returns the config file of slot s, starting its app and
// writing the file the first time.
func (sc *scenario) sidecarConfig(s *slot) (string, error) {
	sd := sc.sidecar
	sd.mu.Lock()
	defer sd.mu.Unlock()
	if p, ok := sd.configs[s.i]; ok {
		return p, nil
	}
	a, err := sc.startApp(s.i, 0)
	if err != nil {
		return "", err
	}
	if sd.apps == nil {
		sd.apps = map[int]*app{}
	}
	sd.apps[s.i] = a
	port := a.port
	be := sc.be
	var b strings.Builder
	fmt.Fprintf(&b, "election:\n  name: e2e\n  ttl: %v\n  retry_period: 500ms\n  shutdown_timeout: 5s\n  release_timeout: 3s\n", be.ttl)
	if be.poll > 0 {
		fmt.Fprintf(&b, "  poll_interval: %v\n", be.poll)
	}
	// The backend flags of the fault suite, as the config's backend section.
	b.WriteString("backend:\n")
	args := be.args(s.addrs())
	for i := 0; i+1 < len(args); i += 2 {
		key := strings.ReplaceAll(strings.TrimPrefix(args[i], "--"), "-", "_")
		if key == "backend" {
			key = "kind"
		}
		fmt.Fprintf(&b, "  %s: %s\n", key, strconv.Quote(args[i+1]))
	}
	fmt.Fprintf(&b, "node:\n  http: 127.0.0.1:0\n  log_format: json\n  log_level: %s\n", logLevel())
	fmt.Fprintf(&b, appHealthYAML, fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	url := fmt.Sprintf("http://127.0.0.1:%d/jobs/", port)
	fmt.Fprintf(&b, `jobs:
  - name: tick
    schedule: "* * * * * *"
    http: {url: %[1]s}
    misfire: run-once
    misfire_grace: %[4]v
  - name: nap
    schedule: "*/5 * * * * *"
    http: {url: %[2]s, method: POST, body: '{"sleep": "1.5s"}', headers: {Content-Type: application/json}}
    misfire: run-once
    misfire_grace: %[4]v
  - name: flaky
    schedule: "*/3 * * * * *"
    http: {url: %[3]s}
    retries: %[5]d
    retry_backoff: 100ms
  - name: slow
    schedule: "*/4 * * * * *"
    http: {url: %[6]s, method: POST}
`, url+"tick", url+"nap", url+"flaky", be.grace, failFirst, url+"slow")
	p := filepath.Join(sc.dir, fmt.Sprintf("baton-%d.yaml", s.i+1))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	if sd.configs == nil {
		sd.configs = map[int]string{}
	}
	sd.configs[s.i] = p
	return p, nil
}

// startApp starts the app of slot i, on port (0: any), and returns it.
// It is stopped when the test ends.
func (sc *scenario) startApp(i, port int) (*app, error) {
	logf, err := os.OpenFile(filepath.Join(sc.dir, fmt.Sprintf("app-%d.log", i+1)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command("python3", "testdata/app.py", sc.runsPath, sc.attemptsPath(), strconv.Itoa(failFirst),
		filepath.Join(sc.dir, "fence"), strconv.Itoa(port))
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	sc.t.Cleanup(stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("app %d: no port: %v (see app-%d.log)", i+1, err, i+1)
	}
	p, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		stop()
		return nil, fmt.Errorf("app %d: port %q: %v", i+1, line, err)
	}
	return &app{port: p, stop: stop}, nil
}

func (sc *scenario) attemptsPath() string { return filepath.Join(sc.dir, "attempts.log") }

// checkAttempts checks the requests of the job "flaky" as the app saw
// them: each attempt of a tick exactly once, all attempts of a tick under
// one token, attempts in order from 1 without a gap, tokens not
// decreasing from tick to tick, and at least one tick that got through
// its failures to the successful attempt. It fails the test on a
// violation and returns a summary line.
func (sc *scenario) checkAttempts() string {
	t := sc.t
	f, err := os.Open(sc.attemptsPath())
	if err != nil {
		t.Errorf("%s: flaky: %v", sc.be.name, err)
		return ""
	}
	defer f.Close()
	type req struct {
		token   uint64
		attempt int
		line    int
	}
	byTick := map[string][]req{}
	n := 0
	sc2 := bufio.NewScanner(f)
	for sc2.Scan() {
		n++
		var job, tick, inst string
		var r req
		if _, err := fmt.Sscanf(sc2.Text(), "%s %s %d %d %s", &job, &tick, &r.token, &r.attempt, &inst); err != nil {
			t.Errorf("attempts.log:%d: %q: %v", n, sc2.Text(), err)
			continue
		}
		r.line = n
		byTick[tick] = append(byTick[tick], r)
	}
	ticks := make([]string, 0, len(byTick))
	for tick := range byTick {
		ticks = append(ticks, tick)
	}
	sort.Strings(ticks) // RFC 3339 UTC: lexical order is time order
	var dups, twoTokens, gaps, order, complete int
	var last uint64
	for _, tick := range ticks {
		rs := byTick[tick]
		seen := map[int]int{}
		for _, r := range rs {
			if prev, ok := seen[r.attempt]; ok {
				dups++
				t.Errorf("%s: flaky tick %s: attempt %d reached the app twice (attempts.log:%d and :%d)", sc.be.name, tick, r.attempt, prev, r.line)
			}
			seen[r.attempt] = r.line
			if r.token != rs[0].token {
				twoTokens++
				t.Errorf("%s: flaky tick %s: attempts under tokens %d and %d (attempts.log:%d)", sc.be.name, tick, rs[0].token, r.token, r.line)
			}
		}
		for a := 1; a <= len(seen); a++ {
			if _, ok := seen[a]; !ok {
				gaps++
				t.Errorf("%s: flaky tick %s: attempts %v, without attempt %d", sc.be.name, tick, seen, a)
				break
			}
		}
		if rs[0].token < last {
			order++
			t.Errorf("%s: flaky tick %s: token %d after a tick with token %d", sc.be.name, tick, rs[0].token, last)
		}
		last = max(last, rs[0].token)
		if _, ok := seen[failFirst+1]; ok {
			complete++
		}
	}
	if complete == 0 {
		t.Errorf("%s: flaky: no tick reached its attempt %d (the first after the app's failures)", sc.be.name, failFirst+1)
	}
	return fmt.Sprintf("    sidecar job flaky: %d ticks, %d requests, %d ticks through %d failures to success; duplicate attempts %d, ticks under two tokens %d, gaps %d, token-order %d\n",
		len(ticks), n, complete, failFirst, dups, twoTokens, gaps, order)
}
