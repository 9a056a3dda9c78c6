package cli

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/jobsfile"
)

const reloadJobsV1 = `jobs:
  - name: a
    schedule: "@every 1s"
    builtin: log
  - name: c
    schedule: "@every 1h"
    builtin: log
  - name: d
    schedule: "@every 1h"
    builtin: log
`

const reloadJobsBad = `jobs:
  - name: b
    schedule: "@every 1s"
    builtin: log
  - name: c
    schedule: "61 * * * *"
    builtin: log
`

const reloadJobsV2 = `jobs:
  - name: b
    schedule: "@every 1s"
    builtin: log
  - name: c
    schedule: "@every 2h"
    builtin: log
  - name: d
    schedule: "@every 1h"
    builtin: log
`

// fileNode is an instance whose jobs come from a jobs file, on the
// in-memory backend, built by baton.New as the command builds it, running.
type fileNode struct {
	b    *baton.Baton
	srv  *httptest.Server
	path string
	logs *envtest.Buffer
}

// startFileNode runs an instance of jobs with the admin token token,
// reloading at sigs (Advanced.ReloadSignals), until the test ends; it
// returns once the instance leads.
func startFileNode(t *testing.T, jobs string, token []byte, sigs ...os.Signal) *fileNode {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(path, []byte(jobs), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := jobsfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := new(envtest.Buffer)
	log := slog.New(slog.NewTextHandler(logs, nil))
	mem := memory.New(election.Timing{})
	hcfg, _ := HostConfig(f, "e", "n1", log)
	b, err := baton.New(baton.Config{
		Backend: mem.Candidate(), Election: "e", Instance: "n1", Jobs: hcfg.Jobs, ShutdownTimeout: hcfg.ShutdownTimeout,
		AdminToken: token, Logger: log,
		Advanced: baton.Advanced{KillGrace: hcfg.KillGrace, Ledger: mem.Ledger(), JobsHash: f.JobsHash(),
			Reloader: newFileReloader(f, nil, "e", "n1", log), ReloadSignals: sigs},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	envtest.Background(t, b.Run)
	waitUntil(t, "leading", b.Leading)
	return &fileNode{b: b, srv: srv, path: path, logs: logs}
}

func (fn *fileNode) write(t *testing.T, jobs string) {
	t.Helper()
	if err := os.WriteFile(fn.path, []byte(jobs), 0o644); err != nil {
		t.Fatal(err)
	}
}

func statusJobs(st httpapi.Status) []string {
	var out []string
	for _, j := range st.Jobs {
		out = append(out, j.Name)
	}
	return out
}

// TestServer_Reload: POST /reload needs the admin token; a bad file is
// refused with 400 and its file:line errors, logged at Error, and the old
// set keeps running; a good one answers 200 with what changed, in the
// same term, and /status shows the new jobs and their hash.
func TestServer_Reload(t *testing.T) {
	fn := startFileNode(t, reloadJobsV1, []byte("tok"))
	before := memStatus(t, fn.srv)
	v1, _ := jobsfile.Parse("x", []byte(reloadJobsV1))
	if before.Term == nil || before.JobsHash != v1.JobsHash() || !slices.Equal(statusJobs(before), []string{"a", "c", "d"}) {
		t.Fatalf("before: term %+v, jobs %v, hash %q, want a, c, d and %q", before.Term, statusJobs(before), before.JobsHash, v1.JobsHash())
	}
	for _, auth := range []string{"", "Bearer wrong"} {
		if code, body := post(t, fn.srv.URL+"/reload", auth); code != http.StatusUnauthorized {
			t.Errorf("POST /reload with Authorization %q: %d %s, want 401", auth, code, body)
		}
	}

	fn.write(t, reloadJobsBad)
	code, body := post(t, fn.srv.URL+"/reload", "Bearer tok")
	if code != http.StatusBadRequest || !strings.Contains(body, fn.path+":6: jobs[1].schedule: \"61 * * * *\"") {
		t.Errorf("POST /reload of a bad file: %d %s, want 400 naming %s:6: jobs[1].schedule", code, body, fn.path)
	}
	if logs := fn.logs.String(); !strings.Contains(logs, "level=ERROR msg=\"reload refused") || !strings.Contains(logs, "jobs[1].schedule") {
		t.Errorf("no Error record of the refused reload:\n%s", logs)
	}
	st := memStatus(t, fn.srv)
	if !slices.Equal(statusJobs(st), []string{"a", "c", "d"}) || st.JobsHash != before.JobsHash {
		t.Errorf("after a refused reload: jobs %v hash %q, want the old set", statusJobs(st), st.JobsHash)
	}

	fn.write(t, reloadJobsV2)
	code, body = post(t, fn.srv.URL+"/reload", "Bearer tok")
	var got httpapi.ReloadSummary
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != http.StatusOK {
		t.Fatalf("POST /reload: %d %v\n%s", code, err, body)
	}
	v2, _ := jobsfile.Parse("x", []byte(reloadJobsV2))
	if !slices.Equal(got.Added, []string{"b"}) || !slices.Equal(got.Removed, []string{"a"}) || !slices.Equal(got.Changed, []string{"c"}) ||
		!slices.Equal(got.Unchanged, []string{"d"}) || got.JobsHash != v2.JobsHash() || got.Token != before.Term.Token {
		t.Errorf("POST /reload: %+v; want added b, removed a, changed c, unchanged d, hash %s, token %d", got, v2.JobsHash(), before.Term.Token)
	}
	st = memStatus(t, fn.srv)
	if !slices.Equal(statusJobs(st), []string{"b", "c", "d"}) || st.JobsHash != v2.JobsHash() || st.Term == nil || st.Term.Token != before.Term.Token {
		t.Errorf("after the reload: jobs %v hash %q term %+v; want b, c, d, %s, token %d", statusJobs(st), st.JobsHash, st.Term, v2.JobsHash(), before.Term.Token)
	}
	waitUntil(t, "b runs", func() bool {
		for _, j := range memStatus(t, fn.srv).Jobs {
			if j.Name == "b" && j.LastRun != nil {
				return true
			}
		}
		return false
	})

	// Settings are read only at start: a change is applied to the jobs and
	// warned about.
	if strings.Contains(fn.logs.String(), "settings (or election.name) changed") {
		t.Errorf("a warning about settings that did not change:\n%s", fn.logs.String())
	}
	fn.write(t, "backend:\n  endpoints: http://10.0.0.1:2379\n"+reloadJobsV2)
	if code, body := post(t, fn.srv.URL+"/reload", "Bearer tok"); code != http.StatusOK {
		t.Fatalf("POST /reload with a backend section: %d %s", code, body)
	}
	if logs := fn.logs.String(); !strings.Contains(logs, "level=WARN msg=\"reload: the backend or node settings (or election.name) changed") {
		t.Errorf("no warning that the backend section is read only at start:\n%s", logs)
	}
}

// TestNode_ReloadOnSignal: SIGHUP re-reads the jobs file
// (Advanced.ReloadSignals, as the command sets it).
func TestNode_ReloadOnSignal(t *testing.T) {
	fn := startFileNode(t, reloadJobsV1, nil, syscall.SIGHUP)
	fn.write(t, reloadJobsV2)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "reloaded", func() bool { return slices.Equal(statusJobs(memStatus(t, fn.srv)), []string{"b", "c", "d"}) })
	waitUntil(t, "the reload recorded", func() bool { return strings.Contains(fn.logs.String(), "msg=\"jobs reloaded\"") })
}

// The helpers of the tests that run a node on a jobs file.

var (
	waitUntil = envtest.WaitUntil
	post      = envtest.Post
)

// memStatus reads srv's /status.
func memStatus(t *testing.T, srv *httptest.Server) httpapi.Status {
	t.Helper()
	resp, err := http.Get(srv.URL + "/status?history=5")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st httpapi.Status
	if err := json.Unmarshal(b, &st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/status: %d %v\n%s", resp.StatusCode, err, b)
	}
	return st
}
