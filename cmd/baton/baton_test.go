package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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
	"github.com/batonhq/baton/internal/httpjob"
)

// batonBin is cmd/baton installed with `go install` into a temporary
// GOBIN, as a user would from a fresh clone, on first use.
var batonBin = envtest.Shared[string]{What: "go install ./cmd/baton", Dir: "baton-cmd-test-", Fail: true,
	Start: func(dir string) (string, error) {
		cmd := exec.Command("go", "install", ".")
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%v\n%s", err, out)
		}
		return filepath.Join(dir, "baton"), nil
	}}

func TestMain(m *testing.M) {
	code := m.Run()
	batonBin.Close()
	os.Exit(code)
}

// batonBinary returns the path of the installed binary.
func batonBinary(t *testing.T) string { return batonBin.Get(t) }

// baton runs the binary to its end and returns its output and exit status.
func runBaton(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(batonBinary(t), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	default:
		t.Fatalf("baton %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// `baton --help` lists every command; `baton version` answers.
func TestHelp_ListsEveryCommand(t *testing.T) {
	out, _, code := runBaton(t, "--help")
	if code != 0 {
		t.Fatalf("baton --help: status %d", code)
	}
	for name := range commands {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("baton --help does not list %q:\n%s", name, out)
		}
	}
	if _, errOut, code := runBaton(t, "frobnicate"); code != 1 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("baton frobnicate: status %d, %s", code, errOut)
	}
	if out, _, code := runBaton(t, "version"); code != 0 || !strings.HasPrefix(out, "baton ") {
		t.Errorf("baton version: %d %q", code, out)
	}
}

// `baton --version` answers as `baton version` does. The stamped version,
// commit and date are checked on a release build (tools/release).
func TestVersion_FlagAndStamps(t *testing.T) {
	v, _, code := runBaton(t, "version")
	if code != 0 {
		t.Fatalf("baton version: status %d", code)
	}
	if out, errOut, code := runBaton(t, "--version"); code != 0 || out != v {
		t.Errorf("baton --version: status %d, %q (stderr %q), want %q", code, out, errOut, v)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A `baton run` sidecar whose backend, node settings and HTTP job all
// come from its config file calls the app with the run's identity in
// headers, and the client commands drive it: status, pause (a paused job
// is not called), trigger (a run now runs even while paused, once per
// request id), history with the run's kind, resume, standby, eligible and
// step-down, readable by a person and, with --json, by a script.
func TestRun_SidecarAndClientCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and a process")
	}
	srv := etcdtest.Start(t)
	type call struct {
		token   uint64
		kind    string
		attempt string
	}
	calls := make(chan call, 100)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strconv.ParseUint(r.Header.Get(httpjob.HeaderToken), 10, 64)
		calls <- call{tok, r.Header.Get(httpjob.HeaderRunKind), r.Header.Get(httpjob.HeaderAttempt)}
	}))
	defer app.Close()
	dir := t.TempDir()
	tokenFile := write(t, dir, "admin-token", "s3cret\n")
	httpAddr := freeAddr(t)
	cfg := write(t, dir, "baton.yaml", fmt.Sprintf(`election:
  name: sidecar-test
  ttl: 2s
  shutdown_timeout: 5s
backend:
  kind: etcd
  endpoints: [%s]
node:
  http: %s
  admin_token_file: %s
  step_down_cooldown: 1s
jobs:
  - name: report
    schedule: "@every 1s"
    http:
      url: %s/jobs/report
`, srv.Endpoint(), httpAddr, tokenFile, app.URL))
	cmd := exec.Command(batonBinary(t), "run", "--config", cfg, "--id", "sidecar-1")
	var logs bytes.Buffer
	var logMu sync.Mutex
	cmd.Stdout, cmd.Stderr = &lockedWriter{&logs, &logMu}, &lockedWriter{&logs, &logMu}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		envtest.Terminate(cmd.Process, exited, 20*time.Second)
		if t.Failed() {
			logMu.Lock()
			t.Logf("baton run output:\n%s", logs.String())
			logMu.Unlock()
		}
	}()
	var first call
	select {
	case first = <-calls:
	case <-time.After(30 * time.Second):
		t.Fatal("the app got no call within 30 s")
	}
	if first.token == 0 || first.kind != "scheduled" || first.attempt != "1" {
		t.Errorf("first call: %+v, want a token, kind scheduled, attempt 1", first)
	}
	nodeURL := "http://" + httpAddr
	cli := func(args ...string) (string, string, int) {
		return runBaton(t, append(args, "--node", nodeURL, "--admin-token-file", tokenFile)...)
	}

	out, errOut, code := cli("status")
	if code != 0 || !strings.Contains(out, "sidecar-1: leader, token ") || !strings.Contains(out, "report") {
		t.Errorf("baton status: %d\n%s%s", code, out, errOut)
	}
	out, _, _ = cli("status", "--json")
	var st httpapi.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || !st.Leading || st.Election != "sidecar-test" {
		t.Errorf("baton status --json: %v: %+v", err, st)
	}

	// Pause: the leader stops calling the job from its next tick.
	out, errOut, code = cli("pause", "report", "--note", "maintenance window")
	if code != 0 || !strings.Contains(out, "report paused by ") {
		t.Fatalf("baton pause: %d\n%s%s", code, out, errOut)
	}
	time.Sleep(1500 * time.Millisecond) // a tick in flight at the pause may still call
	for len(calls) > 0 {
		<-calls
	}
	time.Sleep(2500 * time.Millisecond)
	if n := len(calls); n != 0 {
		t.Errorf("the paused job was called %d times in 2.5 s", n)
	}
	if out, _, _ := cli("status"); !strings.Contains(out, "maintenance window") {
		t.Errorf("baton status does not show the pause:\n%s", out)
	}

	// Run now, twice with one request id: one call, kind manual.
	out, errOut, code = cli("trigger", "report", "--request-id", "deploy-42", "--wait")
	if code != 0 || !strings.Contains(out, "report: request deploy-42: ok on sidecar-1 with token ") {
		t.Errorf("baton trigger --wait: %d\n%s%s", code, out, errOut)
	}
	out, _, code = cli("trigger", "report", "--request-id", "deploy-42")
	if code != 0 || !strings.Contains(out, "request deploy-42") {
		t.Errorf("baton trigger again: %d\n%s", code, out)
	}
	time.Sleep(time.Second)
	if n := len(calls); n != 1 {
		t.Errorf("run now twice with one id: %d calls, want 1", n)
	} else if c := <-calls; c.kind != "manual" {
		t.Errorf("run now: kind %q, want manual", c.kind)
	}
	out, _, code = cli("history", "--job", "report")
	if code != 0 || !strings.Contains(out, "manual") || !strings.Contains(out, "sidecar-1") {
		t.Errorf("baton history: %d\n%s", code, out)
	}
	out, _, _ = cli("history", "--json")
	var hist []httpapi.StatusJob
	if err := json.Unmarshal([]byte(out), &hist); err != nil || len(hist) != 1 || len(hist[0].History) == 0 {
		t.Errorf("baton history --json: %v\n%s", err, out)
	}
	// The accounting of report's ticks: at least the first is due and
	// ran; the classes add up to the ticks due.
	out, errOut, code = cli("audit", "--job", "report", "--window", "1h")
	if f := strings.Fields(out); code != 0 || len(f) < 17 || f[0] != "report" || f[1] != "due" {
		t.Errorf("baton audit: %d %s\n%s", code, errOut, out)
	} else {
		n := map[string]int{}
		for i := 1; i+1 < 17; i += 2 {
			n[f[i]], _ = strconv.Atoi(f[i+1])
		}
		sum := n["ran"] + n["covered"] + n["skipped"] + n["missed"] + n["refused"] + n["lost"] + n["pending"]
		if n["due"] < 1 || n["ran"] < 1 || sum != n["due"] {
			t.Errorf("baton audit: due %d, ran %d, the classes sum to %d\n%s", n["due"], n["ran"], sum, out)
		}
	}

	if out, _, code := cli("resume", "report"); code != 0 || !strings.Contains(out, "report resumed") {
		t.Errorf("baton resume: %d %s", code, out)
	}
	select {
	case c := <-calls:
		if c.kind != "scheduled" {
			t.Errorf("after resume: kind %q", c.kind)
		}
	case <-time.After(5 * time.Second):
		t.Error("no call within 5 s of resume")
	}

	// Errors name what is wrong.
	if _, errOut, code := cli("pause", "nosuch"); code != 1 || !strings.Contains(errOut, `HTTP 404: job "nosuch": not in the job set`) {
		t.Errorf("baton pause nosuch: %d %s", code, errOut)
	}
	if _, errOut, code := runBaton(t, "pause", "report", "--node", nodeURL); code != 1 || !strings.Contains(errOut, "no admin token") {
		t.Errorf("baton pause without a token: %d %s", code, errOut)
	}
	if _, errOut, code := runBaton(t, "pause", "--node", nodeURL); code != 1 || !strings.Contains(errOut, "want a job name") {
		t.Errorf("baton pause without a job: %d %s", code, errOut)
	}

	// Leadership control.
	if out, _, code := cli("standby"); code != 0 || !strings.Contains(out, "standby") {
		t.Errorf("baton standby: %d %s", code, out)
	}
	if out, _, code := cli("eligible"); code != 0 || !strings.Contains(out, "eligible") {
		t.Errorf("baton eligible: %d %s", code, out)
	}
	out, _, code = cli("step-down", "--json")
	var rep struct {
		Message string `json:"message"`
		Leading bool   `json:"leading"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.Leading || !strings.Contains(rep.Message, "stepping down") {
		t.Errorf("baton step-down --json: %d %s", code, out)
	}
	// Alone in the election, it leads again after the 1 s cooldown, with a
	// new token.
	deadline := time.Now().Add(20 * time.Second)
	for {
		c := <-calls
		if c.token > first.token {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no call with a newer token within 20 s of step-down")
		}
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
