package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/httpjob"
	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// holdingApp is a real HTTP endpoint that records every request it gets
// and how many requests of one tick it held at once.
type holdingApp struct {
	hold   time.Duration // each request is held this long, whatever the client does
	status func(attempt string) int

	mu       sync.Mutex
	inFlight map[string]int // by Baton-Tick
	most     map[string]int
	seen     []http.Header
}

func newHoldingApp(t *testing.T, hold time.Duration, status func(attempt string) int) (*holdingApp, string) {
	a := &holdingApp{hold: hold, status: status, inFlight: map[string]int{}, most: map[string]int{}}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return a, srv.URL
}

func (a *holdingApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tick := r.Header.Get(httpjob.HeaderTick)
	a.mu.Lock()
	a.seen = append(a.seen, r.Header.Clone())
	a.inFlight[tick]++
	a.most[tick] = max(a.most[tick], a.inFlight[tick])
	a.mu.Unlock()
	time.Sleep(a.hold) // like an app that does not watch for the client's disconnect
	a.mu.Lock()
	a.inFlight[tick]--
	a.mu.Unlock()
	code := http.StatusOK
	if a.status != nil {
		code = a.status(r.Header.Get(httpjob.HeaderAttempt))
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, "answer %d\n", code)
}

func (a *holdingApp) requests() []http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]http.Header(nil), a.seen...)
}

// results records what a Host tells its Observer (what the metrics count).
type results struct {
	mu       sync.Mutex
	finished []ledger.Result
	retried  int
}

func (o *results) RunStarted(string, time.Time, time.Duration) {}
func (o *results) RunFinished(_ string, r ledger.Result, _ time.Duration) {
	o.mu.Lock()
	o.finished = append(o.finished, r)
	o.mu.Unlock()
}
func (o *results) Misfired(string, int)           {}
func (o *results) OverlapSkipped(string)          {}
func (o *results) Drained(time.Duration, int)     {}
func (o *results) RunRetried(job string, att int) { o.mu.Lock(); o.retried++; o.mu.Unlock() }

// leadUntilRecorded loads jobsYAML (one http job named "call"), leads
// with it on the in-memory ledger until its first run is recorded, stops
// gracefully, and returns the job's recorded runs.
func leadUntilRecorded(t *testing.T, jobsYAML string, obs *results) []ledger.Run {
	t.Helper()
	f, err := jobsfile.Parse("jobs.yaml", []byte(jobsYAML))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	cfg, err := HostConfig(f, "e", "node-a", log)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.New(election.Timing{TTL: 5 * time.Second})
	cfg.Ledger, cfg.Observer = mem.Ledger(), obs
	host, err := schedulerhost.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: "node-a"}, Election: "e", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx, host.Lead) }()
	running := true
	stop := func() {
		if running {
			running = false
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	defer stop()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		runs, err := host.History(context.Background(), "call", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) > 0 && runs[len(runs)-1].Result != ledger.ResultRunning {
			stop() // a graceful stop: the runs in flight finish
			runs, err = host.History(context.Background(), "call", 10)
			if err != nil {
				t.Fatal(err)
			}
			return runs
		}
	}
	t.Fatal("no run recorded in 20 s")
	return nil
}

// firstCallRun leads with one HTTP job, call, every second on url, with
// retries retries 50 ms apart, until its first run is recorded
// (leadUntilRecorded), and returns that run.
func firstCallRun(t *testing.T, url string, retries int, obs *results) ledger.Run {
	t.Helper()
	runs := leadUntilRecorded(t, fmt.Sprintf(`
jobs:
  - name: call
    schedule: "* * * * * *"
    http: {url: %s}
    retries: %d
    retry_backoff: 50ms
`, url, retries), obs)
	return runs[len(runs)-1]
}

// An HTTP job without a timeout is bounded by httpjob.DefaultTimeout as
// by a job timeout: recorded and counted as a timeout, and not retried,
// so that the endpoint, still working on the first request, never gets a
// second one for the same tick.
func TestHTTPJob_DefaultBoundIsAJobTimeout(t *testing.T) {
	shortenHTTPDefault(t, 300*time.Millisecond)
	app, url := newHoldingApp(t, 1500*time.Millisecond, nil)
	obs := &results{}
	first := firstCallRun(t, url, 2, obs)
	if first.Result != ledger.ResultTimeout || first.Attempts > 1 || !strings.Contains(first.Error, schedulerhost.ErrJobTimeout.Error()) {
		t.Errorf("first run recorded as %s after %d attempt(s), error %q; want timeout after 1, with %q",
			first.Result, first.Attempts, first.Error, schedulerhost.ErrJobTimeout)
	}
	app.mu.Lock()
	for tick, n := range app.most {
		if n > 1 {
			t.Errorf("tick %s: the endpoint held %d requests of it at once", tick, n)
		}
	}
	app.mu.Unlock()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.finished) == 0 || obs.finished[0] != ledger.ResultTimeout || obs.retried != 0 {
		t.Errorf("observer (metrics): finished %v, %d retries; want timeout first, no retry", obs.finished, obs.retried)
	}
}

// shortenHTTPDefault makes d the bound of HTTP jobs without a timeout
// until the test ends.
func shortenHTTPDefault(t *testing.T, d time.Duration) {
	old := httpDefaultTimeout
	httpDefaultTimeout = d
	t.Cleanup(func() { httpDefaultTimeout = old })
}

// A status that a retry cannot mend (by default any 4xx but 408 and 429,
// here a 409 refusing a stale token) ends the run as failed at once,
// whatever its retries, and the history says why.
func TestHTTPJob_FinalStatusNotRetried(t *testing.T) {
	app, url := newHoldingApp(t, 0, func(string) int { return http.StatusConflict })
	obs := &results{}
	first := firstCallRun(t, url, 3, obs)
	if first.Result != ledger.ResultFailed || first.Attempts > 1 || !strings.Contains(first.Error, "HTTP 409 Conflict: answer 409 (final status: not retried)") {
		t.Errorf("first run recorded as %s after %d attempt(s), error %q; want failed after 1, with the final status", first.Result, first.Attempts, first.Error)
	}
	byTick := map[string]int{}
	for _, h := range app.requests() {
		byTick[h.Get("Baton-Tick")]++
	}
	for tick, n := range byTick {
		if n != 1 {
			t.Errorf("tick %s: %d requests, want 1", tick, n)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.retried != 0 {
		t.Errorf("%d retries, want none", obs.retried)
	}
}

// A retried status (503, then 200) gets a second attempt, which carries
// the same run id and idempotency key as the first, and the next attempt
// number: the receiver can tell a retry from a new run.
func TestHTTPJob_RetryCarriesTheRunID(t *testing.T) {
	app, url := newHoldingApp(t, 0, func(attempt string) int {
		if attempt == "1" {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	first := firstCallRun(t, url, 3, &results{})
	if first.Result != ledger.ResultOK || first.Attempts != 2 {
		t.Errorf("first run recorded as %s after %d attempt(s), want ok after 2", first.Result, first.Attempts)
	}
	reqs := app.requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests, want 2 or more", len(reqs))
	}
	a, b := reqs[0], reqs[1]
	wantID := "e/call/" + first.Tick.UTC().Format(time.RFC3339Nano)
	for i, h := range []http.Header{a, b} {
		if h.Get("Baton-Attempt") != fmt.Sprint(i+1) || h.Get("Baton-Run-Id") != wantID || h.Get("Idempotency-Key") != `"`+wantID+`"` {
			t.Errorf("attempt %d: Baton-Attempt %q, Baton-Run-Id %q, Idempotency-Key %q; want %d, %q, the same quoted",
				i+1, h.Get("Baton-Attempt"), h.Get("Baton-Run-Id"), h.Get("Idempotency-Key"), i+1, wantID)
		}
	}
	for _, h := range reqs[2:] { // the next ticks: other run ids
		if h.Get("Baton-Run-Id") == wantID {
			t.Errorf("a later tick (%s) reused the run id %s", h.Get("Baton-Tick"), wantID)
		}
	}
}

// TestHostConfig_KillGrace: the Host waits the commands' kill grace plus
// the margin, and the budget of the same file counts both.
func TestHostConfig_KillGrace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		yaml      string
		wantGrace time.Duration // the Host's KillGrace
	}{
		{"default", "jobs:\n  - name: j\n    schedule: \"@every 1s\"\n    command: \"true\"\n", 6 * time.Second},
		{"set", "election:\n  kill_grace: 2s\njobs:\n  - name: j\n    schedule: \"@every 1s\"\n    command: \"true\"\n", 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := jobsfile.Parse("jobs.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			hc, _ := HostConfig(f, "e", "n1", nil)
			if hc.KillGrace != tc.wantGrace || len(hc.Jobs) != 1 || hc.Instance != "n1" {
				t.Errorf("HostConfig: KillGrace %v, %d jobs, instance %q; want %v, 1, n1", hc.KillGrace, len(hc.Jobs), hc.Instance, tc.wantGrace)
			}
			parts := ShutdownConfigOf(f).Parts()
			if g := parts[1].Max + parts[2].Max; g != tc.wantGrace {
				t.Errorf("budget's kill_grace + margin = %v, want the Host's %v", g, tc.wantGrace)
			}
		})
	}
}

// TestHostConfig_SafetyMarginForCommands: a safety margin too short to
// kill a lost term's commands before the lease can pass is refused,
// naming the field, when there are command jobs; not otherwise.
func TestHostConfig_SafetyMarginForCommands(t *testing.T) {
	const cmdJob = "jobs:\n  - name: j\n    schedule: \"@every 1s\"\n    command: \"true\"\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"too short", "election:\n  ttl: 2s\n  safety_margin: 50ms\n" + cmdJob,
			"jobs.yaml:1: election.safety_margin: 50ms: below 100ms, which command jobs need"},
		{"enough", "election:\n  ttl: 2s\n  safety_margin: 100ms\n" + cmdJob, ""},
		{"no command job", "election:\n  ttl: 2s\n  safety_margin: 50ms\njobs:\n  - name: j\n    schedule: \"@every 1s\"\n    builtin: log\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := jobsfile.Parse("jobs.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = HostConfig(f, "e", "n1", nil)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("HostConfig: %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("HostConfig: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestHostConfig_RetriesAndJitter: the jobs file's retry and jitter
// fields reach the Host's job; a jitter as long as the period is the
// Host's error, located at the job's line.
func TestHostConfig_RetriesAndJitter(t *testing.T) {
	f, err := jobsfile.Parse("jobs.yaml", []byte("jobs:\n  - name: j\n    schedule: \"0 * * * * *\"\n    command: \"true\"\n"+
		"    retries: 2\n    retry_backoff: 3s\n    retry_backoff_max: 20s\n    jitter: 60s\n"))
	if err != nil {
		t.Fatal(err)
	}
	hc, _ := HostConfig(f, "e", "n1", nil)
	if j := hc.Jobs[0]; j.Retries != 2 || j.RetryBackoff != 3*time.Second || j.RetryBackoffMax != 20*time.Second || j.Jitter != time.Minute {
		t.Errorf("HostConfig job = %+v, want retries 2, backoff 3s to 20s, jitter 1m", j)
	}
	_, err = schedulerhost.New(hc)
	if got := f.Locate(err); got == nil || !strings.HasPrefix(got.Error(), "jobs.yaml:2: jobs[0]: Jitter 1m0s: must be shorter than") {
		t.Errorf("New: %v, want the jitter error at the job's line", got)
	}
}
