package receivers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/httpjob"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// workMS is the stand-in work of the handlers (WORK_MS).
const workMS = 1000

// snippet returns the fenced block that follows <!-- receivers:name -->
// in docs/receivers.md.
func snippet(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "receivers.md"))
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- receivers:" + name + " -->\n```"
	_, rest, ok := strings.Cut(string(doc), marker)
	if !ok {
		t.Fatalf("docs/receivers.md: no %q", marker)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the fence's language
	code, _, ok := strings.Cut(rest, "\n```\n")
	if !ok {
		t.Fatalf("docs/receivers.md: the %s block does not end", name)
	}
	return code + "\n"
}

// output collects a process's output.
type output struct{ envtest.Buffer }

// count returns how many lines of the output start with prefix.
func (o *output) count(prefix string) int {
	n := 0
	for _, l := range strings.Split(o.String(), "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// waitFor waits up to d for a line starting with prefix.
func (o *output) waitFor(prefix string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if o.count(prefix) > 0 {
			return true
		}
	}
	return false
}

// start runs argv in dir with PORT and WORK_MS set, until the test ends,
// and returns its URL once it accepts connections.
func start(t *testing.T, dir string, argv ...string) (string, *output) {
	t.Helper()
	ports, err := envtest.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	out := &output{}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(ports[0]), "WORK_MS="+strconv.Itoa(workMS),
		"ELECTION=e", "FENCE_FILE="+filepath.Join(dir, "fence.json"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", argv[0], out)
		}
	})
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr + "/jobs/invoice-run", out
		}
		if time.Now().After(end) {
			t.Fatalf("%s: not listening on %s after 30 s:\n%s", argv[0], addr, out)
		}
	}
}

// runCtx is a run's context as a Host makes it.
func runCtx(ctx context.Context, token uint64, tick time.Time) context.Context {
	ctx = election.NewTerm(ctx, token).Context()
	ctx = schedulerhost.ContextWithTick(ctx, schedulerhost.Tick{Job: "call", Time: tick})
	return schedulerhost.ContextWithAttempt(ctx, 1)
}

// firstRun leads election "e" with job "call" (url, retries: 2) on the
// in-memory backend, whose first term has token 1, until the job's first
// run is recorded, and returns that run.
func firstRun(t *testing.T, url string) ledger.Run {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	j, err := httpjob.New("call", "e", "node-a", httpjob.Request{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.New(election.Timing{TTL: 5 * time.Second})
	host, err := schedulerhost.New(schedulerhost.Config{Ledger: mem.Ledger(), Instance: "node-a", Logger: log,
		Jobs: []schedulerhost.Job{{Name: "call", Schedule: "* * * * * *", Run: j.Run, Timeout: 10 * time.Second,
			Retries: 2, RetryBackoff: 50 * time.Millisecond}}})
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
	defer func() {
		cancel()
		<-done
	}()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		runs, err := host.History(context.Background(), "call", 100)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(runs); n > 0 && runs[n-1].Result != ledger.ResultRunning {
			return runs[n-1]
		}
	}
	t.Fatal("no run recorded in 30 s")
	return ledger.Run{}
}

// exercise drives the handler at url, whose output is out: a write with
// a newer token; a Host's run with an older one, refused with 409 and
// not retried; and a request aborted mid-work, which the handler notices
// and does not write.
func exercise(t *testing.T, url string, out *output) {
	j, err := httpjob.New("call", "e", "node-a", httpjob.Request{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	newer := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	if err := j.Run(runCtx(context.Background(), 1000, newer)); err != nil {
		t.Fatalf("a run with token 1000: %v", err)
	}
	// The output comes through a pipe: a line can follow the answer.
	out.waitFor("wrote e/call/2026-11-26T10:00:00Z with token 1000", 10*time.Second)
	if n := out.count("wrote e/call/2026-11-26T10:00:00Z with token 1000"); n != 1 {
		t.Errorf("the write of token 1000 logged %d times, want 1", n)
	}

	otherElection(t, url, out)

	// The Host's term has token 1: refused, final, not retried.
	r := firstRun(t, url)
	runID := "e/call/" + r.Tick.UTC().Format(time.RFC3339Nano)
	if r.Result != ledger.ResultFailed || r.Attempts > 1 || r.Token != 1 ||
		!strings.Contains(r.Error, "HTTP 409 Conflict: stale token 1: 1000 has written invoice-run (final status: not retried)") {
		t.Errorf("stale run recorded as %s, token %d, %d attempt(s), error %q; want failed, token 1, 1 attempt, the 409",
			r.Result, r.Token, r.Attempts, r.Error)
	}
	out.waitFor("refused "+runID+": token 1 < 1000", 10*time.Second)
	if n := out.count("refused " + runID + ": token 1 < 1000"); n != 1 {
		t.Errorf("the handler refused %s %d times, want once (no retry)", runID, n)
	}
	if n := out.count("wrote " + runID); n != 0 {
		t.Errorf("the handler wrote %s with a stale token", runID)
	}

	// Aborted mid-work, as on a lost term: the handler notices.
	lost := errors.New("leadership lost")
	ctx, cancel := context.WithCancelCause(context.Background())
	timer := time.AfterFunc(300*time.Millisecond, func() { cancel(lost) })
	defer timer.Stop()
	aborted := time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC)
	if err := j.Run(runCtx(ctx, 1001, aborted)); !errors.Is(err, lost) {
		t.Errorf("aborted run: %v, want the cause %v", err, lost)
	}
	id := "e/call/2026-11-26T11:00:00Z"
	if !out.waitFor("baton stopped waiting: "+id+" not written", workMS*time.Millisecond+10*time.Second) {
		t.Errorf("the handler did not log that baton stopped waiting for %s", id)
	}
	if n := out.count("wrote " + id); n != 0 {
		t.Errorf("the handler wrote %s after baton stopped waiting", id)
	}
}

func TestExpress(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			envtest.Unavailable(t, "%s not installed (Debian: apt-get install nodejs npm)", tool)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.js"), []byte(snippet(t, "express")), 0o644); err != nil {
		t.Fatal(err)
	}
	copyModule(t, nodeModule, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	npm := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", "express@5")
	npm.Dir = dir
	if b, err := npm.CombinedOutput(); err != nil {
		envtest.Unavailable(t, "npm install express: %v\n%s", err, b)
	}
	url, out := start(t, dir, "node", "app.js")
	exercise(t, url, out)
}

func TestFlask(t *testing.T) {
	// The first python3 that imports flask: the one on PATH, or Debian's
	// (python3-flask) where PATH leads to another interpreter.
	python := ""
	var tried []string
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		b, err := exec.Command(p, "-c", "import flask").CombinedOutput()
		if err == nil {
			python = p
			break
		}
		tried = append(tried, fmt.Sprintf("%s: %v: %s", p, err, bytes.TrimSpace(b)))
	}
	if python == "" {
		envtest.Unavailable(t, "no python3 imports flask (Debian: apt-get install python3-flask): %s", strings.Join(tried, "; "))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.py"), []byte(snippet(t, "flask")), 0o644); err != nil {
		t.Fatal(err)
	}
	copyModule(t, pythonModule, dir)
	url, out := start(t, dir, python, "app.py")
	exercise(t, url, out)
}
