package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/ledger"
)

// TestSidecarRetryCut kills the application beside the leading sidecar
// while its job, with retries: 2, has a tick to run: once between
// requests, so that the tick's attempt finds the connection refused and
// the application never sees it, and once while the tick's request is in
// flight, so that its outcome is unknown. Either way the leader's
// attempt fails with retries left, the leader steps down for its
// application before the retry (retry_backoff: 1m), and the tick is not
// run again: the other sidecar, which leads next, does not run it, and
// its ledger entry, read from that sidecar, is failed, with 1 attempt,
// and the accounting calls it lost, not-delivered (refused) or retry-cut
// (in flight). The applications' own log of the requests they received
// shows each tick at most once, from one instance.
func TestSidecarRetryCut(t *testing.T) {
	skipUnlessEnabled(t)
	if _, err := exec.LookPath("python3"); err != nil {
		envtest.Unavailable(t, "python3 (the app beside the sidecars): %v", err)
	}
	eachBackend(t, "postgres,redis", func(t *testing.T, name string) {
		for _, tc := range []struct {
			name, schedule, path string
			want                 audit.Reason
		}{
			{"refused", "* * * * * *", "quick", audit.ReasonNotDelivered},
			{"in flight", "*/5 * * * * *", "hang", audit.ReasonRetryCut},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := startCutCluster(t, name, tc.schedule, tc.path)
				l := c.leader(t, 30*time.Second)
				o := c.nodes[1-l]
				var cut time.Time // the tick the leader's attempt of which failed
				if tc.path == "quick" {
					// Two requests in, then mid-second: no request in flight.
					if !waitFor(30*time.Second, func() bool { return len(c.requests(c.nodes[l].id)) >= 2 }) {
						t.Fatalf("not 2 requests of %s in 30 s; logs in %s", c.nodes[l].id, c.dir)
					}
					waitFor(2*time.Second, func() bool { ms := time.Now().Nanosecond() / 1e6; return ms >= 300 && ms <= 650 })
					c.nodes[l].app.stop()
				} else {
					if !waitFor(30*time.Second, func() bool { return len(c.requests(c.nodes[l].id)) >= 1 }) {
						t.Fatalf("no request of %s reached its app in 30 s", c.nodes[l].id)
					}
					c.nodes[l].app.stop()
					cut = c.requests(c.nodes[l].id)[0].tick
				}
				killed := time.Now()
				if !waitFor(30*time.Second, func() bool { s, err := o.status(0); return err == nil && s.Leading }) {
					t.Fatalf("%s does not lead 30 s after %s's app was killed; logs in %s", o.id, c.nodes[l].id, c.dir)
				}
				led := time.Now()
				// The next leader has had its chance to run the tick again.
				if !waitFor(30*time.Second, func() bool { return len(c.requests(o.id)) >= 1 }) {
					t.Fatalf("no request of %s, the next leader, in 30 s", o.id)
				}
				hist := c.history(t, o)
				var failed []ledger.Run
				for _, r := range hist {
					if r.Instance == c.nodes[l].id && r.Result == ledger.ResultFailed {
						failed = append(failed, r)
					}
				}
				if len(failed) != 1 {
					t.Fatalf("%s's failed entries %+v, want 1 (history %+v)", c.nodes[l].id, failed, hist)
				}
				e := failed[0]
				if !cut.IsZero() && !e.Tick.Equal(cut) {
					t.Errorf("the failed entry is of tick %v, want %v, the request in flight", e.Tick, cut)
				}
				cl, why := audit.Classify(e)
				t.Logf("%s: %s's app killed %v; %s led %v later; tick %v: %s, %d attempt(s), %q: %s/%s",
					name, c.nodes[l].id, killed.Format(time.TimeOnly), o.id, led.Sub(killed).Round(time.Millisecond),
					e.Tick.Format(time.TimeOnly), e.Result, e.Attempts, e.Error, cl, why)
				if e.Attempts != 1 || cl != audit.Lost || why != tc.want ||
					(tc.want == audit.ReasonNotDelivered) != strings.Contains(e.Error, audit.ErrTextNotDelivered) {
					t.Errorf("entry %+v: %s/%s; want 1 attempt, %s/%s", e, cl, why, audit.Lost, tc.want)
				}
				for _, r := range hist {
					if r.Tick.Equal(e.Tick) && r != e {
						t.Errorf("tick %v has a second entry %+v", e.Tick, r)
					}
				}
				c.checkOnce(t, e.Tick, tc.want == audit.ReasonNotDelivered)
				// Every instance's accounting says the same of the tick.
				for _, n := range c.nodes {
					var got audit.Range
					waitFor(30*time.Second, func() bool { got = n.auditOf(e.Tick); return got.Class == audit.Lost })
					if got.Class != audit.Lost || got.Reason != tc.want || got.Instance != c.nodes[l].id {
						t.Errorf("%s's GET /audit of tick %v: %s/%s by %q, want %s/%s by %s", n.id, e.Tick, got.Class, got.Reason, got.Instance, audit.Lost, tc.want, c.nodes[l].id)
					}
				}
			})
		}
	})
}

// cutCluster is two sidecars on one backend, each beside an app of its
// own (testdata/cutapp.py), and the log of the requests the apps got.
type cutCluster struct {
	dir, reqPath string
	nodes        [2]*cutNode
}

type cutNode struct {
	id   string
	http string // the sidecar's API
	app  *cutApp
}

type cutApp struct {
	port int
	stop func() // kills it and waits; once
}

// received is one line of the apps' request log.
type received struct {
	instance, job string
	tick          time.Time
	attempt       int
}

// startCutCluster starts the backend name and two sidecars whose job
// "cut" (schedule, retries 2, backoff 1 m) posts to the app's /jobs/path.
func startCutCluster(t *testing.T, name, schedule, path string) *cutCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "baton-e2e-retrycut-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("BATON_E2E_KEEP") == "1" {
			fmt.Printf("e2e retry cut %s: artifacts kept in %s\n", name, dir)
			return
		}
		os.RemoveAll(dir)
	})
	be := startBackend(t, name, dir)
	c := &cutCluster{dir: dir, reqPath: filepath.Join(dir, "requests.log")}
	for i := range c.nodes {
		n := &cutNode{id: fmt.Sprintf("node-%d", i+1), http: freeLocalAddr(t), app: startCutApp(t, dir, c.reqPath, i)}
		var b strings.Builder
		fmt.Fprintf(&b, "election:\n  name: cut\n  ttl: %v\n  retry_period: 500ms\n  shutdown_timeout: 5s\n  release_timeout: 3s\n", be.ttl)
		if be.poll > 0 {
			fmt.Fprintf(&b, "  poll_interval: %v\n", be.poll)
		}
		b.WriteString("backend:\n")
		args := be.args(be.targetsOf(i))
		for k := 0; k+1 < len(args); k += 2 {
			key := strings.ReplaceAll(strings.TrimPrefix(args[k], "--"), "-", "_")
			if key == "backend" {
				key = "kind"
			}
			fmt.Fprintf(&b, "  %s: %s\n", key, strconv.Quote(args[k+1]))
		}
		fmt.Fprintf(&b, "node:\n  http: %s\n  log_format: json\n  log_level: debug\n", n.http)
		fmt.Fprintf(&b, appHealthYAML, fmt.Sprintf("http://127.0.0.1:%d/healthz", n.app.port))
		fmt.Fprintf(&b, "jobs:\n  - name: cut\n    schedule: %q\n    http: {url: \"http://127.0.0.1:%d/jobs/%s\"}\n    retries: 2\n    retry_backoff: 1m\n",
			schedule, n.app.port, path)
		cfg := filepath.Join(dir, n.id+".yaml")
		if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		startCutSidecar(t, dir, cfg, n.id)
		c.nodes[i] = n
	}
	return c
}

// startCutApp starts app i, its stderr in dir, and stops it when t ends.
func startCutApp(t *testing.T, dir, reqPath string, i int) *cutApp {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("app-%d.log", i+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("python3", "testdata/cutapp.py", reqPath)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &cutApp{}
	done := make(chan struct{})
	a.stop = func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			close(done)
		}
	}
	t.Cleanup(a.stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err == nil {
		a.port, err = strconv.Atoi(strings.TrimSpace(line))
	}
	if err != nil {
		t.Fatalf("app %d: no port: %v (see app-%d.log)", i+1, err, i+1)
	}
	return a
}

// startCutSidecar starts `baton run` with cfg as id, its log in dir, and
// stops it gracefully (its stdin closed) when t ends.
func startCutSidecar(t *testing.T, dir, cfg, id string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, id+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(batonBin, "run", "--config", cfg, "--id", id, "--stop-on-stdin-eof")
	cmd.Stdout, cmd.Stderr, cmd.Dir = f, f, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // waited for by the cleanup
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

// freeLocalAddr returns a 127.0.0.1 address nothing listens on now.
func freeLocalAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// cutStatus is what the test reads of a sidecar's GET /status.
type cutStatus struct {
	Leading bool `json:"leading"`
	Jobs    []struct {
		Name    string       `json:"name"`
		History []ledger.Run `json:"history"`
	} `json:"jobs"`
}

// status reads n's GET /status, with history entries of each job.
func (n *cutNode) status(history int) (*cutStatus, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://%s/status?history=%d", n.http, history))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /status: %s: %s %v", resp.Status, b, err)
	}
	var s cutStatus
	return &s, json.Unmarshal(b, &s)
}

// auditOf returns the range of n's GET /audit of the job "cut" that
// holds tick, or the zero Range if none does (or the read failed).
func (n *cutNode) auditOf(tick time.Time) audit.Range {
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://%s/audit?job=cut&window=1h", n.http))
	if err != nil {
		return audit.Range{}
	}
	defer resp.Body.Close()
	var body struct {
		Reports []audit.Report `json:"reports"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return audit.Range{}
	}
	for _, rep := range body.Reports {
		for _, r := range rep.NotOK {
			if !tick.Before(r.First) && !tick.After(r.Last) {
				return r
			}
		}
	}
	return audit.Range{}
}

// leader waits up to d for exactly one node to lead and returns its
// index.
func (c *cutCluster) leader(t *testing.T, d time.Duration) int {
	t.Helper()
	l := -1
	if !waitFor(d, func() bool {
		l = -1
		for i, n := range c.nodes {
			if s, err := n.status(0); err == nil && s.Leading {
				if l >= 0 {
					return false
				}
				l = i
			}
		}
		return l >= 0
	}) {
		t.Fatalf("no single leader in %v; logs in %s", d, c.dir)
	}
	return l
}

// history returns the ledger's entries of the job "cut", as n reads them.
func (c *cutCluster) history(t *testing.T, n *cutNode) []ledger.Run {
	t.Helper()
	s, err := n.status(50)
	if err != nil {
		t.Fatalf("%s: %v", n.id, err)
	}
	for _, j := range s.Jobs {
		if j.Name == "cut" {
			return j.History
		}
	}
	t.Fatalf("%s: no job cut in its status", n.id)
	return nil
}

// requests returns the lines of the request log, of instance only if it
// is not empty.
func (c *cutCluster) requests(instance string) []received {
	var out []received
	for _, line := range readLines(c.reqPath) {
		f := strings.Fields(line)
		if len(f) != 5 || instance != "" && f[0] != instance {
			continue
		}
		tick, _ := time.Parse(time.RFC3339, f[2])
		attempt, _ := strconv.Atoi(f[4])
		out = append(out, received{instance: f[0], job: f[1], tick: tick, attempt: attempt})
	}
	return out
}

// checkOnce checks the request log: every tick reached an app at most
// once, and the cut tick reached none (neverSeen) or one.
func (c *cutCluster) checkOnce(t *testing.T, cut time.Time, neverSeen bool) {
	t.Helper()
	rs := c.requests("")
	byTick := map[time.Time][]received{}
	for _, r := range rs {
		byTick[r.tick] = append(byTick[r.tick], r)
	}
	for tick, got := range byTick {
		if len(got) > 1 {
			t.Errorf("tick %v reached the apps %d times: %+v", tick.Format(time.TimeOnly), len(got), got)
		}
	}
	if n := len(byTick[cut]); neverSeen && n != 0 || !neverSeen && n != 1 {
		t.Errorf("the cut tick %v reached the apps %d times, want %d", cut.Format(time.TimeOnly), n, map[bool]int{true: 0, false: 1}[neverSeen])
	}
	t.Logf("requests: %d ticks, %d requests; the cut tick %v: %d", len(byTick), len(rs), cut.Format(time.TimeOnly), len(byTick[cut]))
}
