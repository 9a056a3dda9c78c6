package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batonhq "github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
)

// The client commands read node.admin_token_file relative to the config
// file's directory, and an error about it names the file, line and field
// it came from. The working directory (the package's) holds no such file.
func TestClient_AdminTokenFileFromTheConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, dir, "baton.yaml", fmt.Sprintf(`election:
  name: client-test
node:
  http: %s
  admin_token_file: admin-token
jobs:
  - {name: report, schedule: "@every 1m", http: {url: "http://127.0.0.1:1/"}}
`, freeAddr(t)))
	// No token file yet: the error names where the value came from.
	err := runPause(context.Background(), []string{"report", "--config", cfg}, io.Discard, io.Discard)
	want := cfg + ":5: node.admin_token_file: --admin-token-file: open " + filepath.Join(dir, "admin-token") + ": no such file"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("no token file: %v\nwant prefix %s", err, want)
	}
	// With the token beside the config file, the client reads it and asks
	// the node (which is not there).
	write(t, dir, "admin-token", "s3cret\n")
	err = runPause(context.Background(), []string{"report", "--config", cfg}, io.Discard, io.Discard)
	if want := cfg + ":4: node.http: POST http://"; err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("token file beside the config: %v, want the node's connection refused, prefixed %q", err, want)
	}
	if _, serr := os.Stat("admin-token"); serr == nil {
		t.Fatal("the package directory holds an admin-token file: the test proves nothing")
	}
}

// statusNode runs an instance of the election on mem with one job,
// report, every second, built by baton.New, serving its API; it stops at
// the test's end.
func statusNode(t *testing.T, mem *memory.Server, id string) (*batonhq.Baton, string) {
	t.Helper()
	job := batonhq.Job{Name: "report", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}
	b, err := batonhq.New(batonhq.Config{Backend: mem.Candidate(), Election: "e", Instance: id, Jobs: []batonhq.Job{job},
		Logger:   slog.New(slog.DiscardHandler),
		Advanced: batonhq.Advanced{Ledger: mem.Ledger(), Control: mem.Control(), BackendKind: "memory"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	envtest.Background(t, b.Run)
	return b, srv.URL
}

// `baton status` beside a follower shows the cluster's last run of each
// job (the ledger's), not the follower's own (none here); a paused job
// says so in NEXT instead of a time at which it would not run.
func TestStatus_FollowerShowsTheClustersLastRun(t *testing.T) {
	mem := memory.New(election.Timing{})
	a, _ := statusNode(t, mem, "a")
	for end := time.Now().Add(10 * time.Second); !a.Leading(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("a does not lead within 10 s")
		}
	}
	_, bURL := statusNode(t, mem, "b")
	var last time.Time
	for end := time.Now().Add(10 * time.Second); last.IsZero(); time.Sleep(50 * time.Millisecond) {
		if runs, err := mem.Ledger().History(context.Background(), "report", 1); err == nil && len(runs) == 1 && !runs[0].Ended.IsZero() {
			last = runs[0].Tick
		}
		if time.Now().After(end) {
			t.Fatal("the leader ran no report within 10 s")
		}
	}
	status := func() string {
		t.Helper()
		var out bytes.Buffer
		if err := runStatus(context.Background(), []string{"--node", bURL}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	line := func(out string) []string {
		for l := range strings.Lines(out) {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "report" {
				return f
			}
		}
		t.Fatalf("no line for report:\n%s", out)
		return nil
	}
	out := status()
	// report  @every 1s  NEXT  LAST RUN  RESULT  PAUSED
	f := line(out)
	if len(f) < 7 || f[4] == "-" || f[5] != "ok" && f[5] != "running" {
		t.Errorf("baton status on the follower: no last run of the cluster's (the leader ran the tick of %s):\n%s", last.UTC().Format(time.RFC3339), out)
	} else if tick, err := time.Parse(time.RFC3339, f[4]); err != nil || tick.Before(last) {
		t.Errorf("last run %s, want the tick of %s or later:\n%s", f[4], last.UTC().Format(time.RFC3339), out)
	}

	if err := control.NewJobs(mem.Control()).Pause(context.Background(), control.Pause{Job: "report", By: "alice", At: time.Now(), Note: "freeze"}); err != nil {
		t.Fatal(err)
	}
	out = status()
	if f := line(out); len(f) < 4 || f[3] != "paused" {
		t.Errorf("baton status: NEXT of a paused job is not \"paused\":\n%s", out)
	}
}
