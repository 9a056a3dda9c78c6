package node

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// ctlNode is a node with a control store on mem, serving its API.
type ctlNode struct {
	n   *Node
	srv *httptest.Server
	el  *election.Elector
}

func newCtlNode(t *testing.T, mem *memory.Server, id string, hash string, jobs ...schedulerhost.Job) *ctlNode {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	host, err := schedulerhost.New(schedulerhost.Config{Jobs: jobs, Ledger: mem.Ledger(), Control: mem.Control(), Instance: id,
		RunNowPoll: 20 * time.Millisecond, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: id}, Election: "e", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Elector: el, Host: host, Election: "e", Backend: "memory", Logger: discard,
		AdminToken: []byte("tok"), Control: mem.Control(), Version: "v1", InstanceInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n.jobsHash = hash
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(srv.Close)
	return &ctlNode{n: n, srv: srv, el: el}
}

func (c *ctlNode) call(t *testing.T, method, path, token string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, c.srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type jobRuns struct {
	mu   sync.Mutex
	runs []schedulerhost.Manual
}

func (j *jobRuns) job(name, schedule string) schedulerhost.Job {
	return schedulerhost.Job{Name: name, Schedule: schedule, Run: func(ctx context.Context) error {
		m, _ := schedulerhost.ManualFromContext(ctx)
		j.mu.Lock()
		j.runs = append(j.runs, m)
		j.mu.Unlock()
		return nil
	}}
}

func (j *jobRuns) manual() []schedulerhost.Manual {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []schedulerhost.Manual
	for _, m := range j.runs {
		if m.RequestID != "" {
			out = append(out, m)
		}
	}
	return out
}

// TestControl_Endpoints: pause, resume and run now through a follower's
// API (admin token required; unknown jobs, bad ids and conflicts
// refused), the run done once by the leader, and /status on both nodes
// showing the pause, every instance (a differing job set flagged) and the
// leader's term.
func TestControl_Endpoints(t *testing.T) {
	mem := memory.New(election.Timing{})
	var rs jobRuns
	a := newCtlNode(t, mem, "a", "hash-1", rs.job("report", "0 0 0 1 1 *"), rs.job("other", "0 0 0 1 1 *"))
	startNode(t, a.n)
	waitUntil(t, "a leads", a.el.IsLeader)
	b := newCtlNode(t, mem, "b", "hash-2", rs.job("report", "0 0 0 1 1 *"))
	startNode(t, b.n)

	for _, c := range []struct {
		method, path, token string
		hdr                 map[string]string
		code                int
		want                string
	}{
		{"POST", "/jobs/report/pause", "", nil, http.StatusUnauthorized, "unauthorized"},
		{"POST", "/jobs/report/pause", "wrong", nil, http.StatusUnauthorized, "unauthorized"},
		{"POST", "/jobs/nope/pause", "tok", nil, http.StatusNotFound, `job \"nope\": not in the job set of b`},
		{"POST", "/jobs/report/resume", "tok", nil, http.StatusConflict, `job \"report\" is not paused`},
		{"POST", "/jobs/report/run", "tok", map[string]string{"Idempotency-Key": "has space"}, http.StatusBadRequest, "request id"},
		{"GET", "/runs/none", "", nil, http.StatusNotFound, "request none: none"},
		{"POST", "/jobs/report/pause?by=alice&note=migration", "tok", nil, http.StatusOK, `"by": "alice"`},
		{"POST", "/jobs/report/resume?run_missed=maybe", "tok", nil, http.StatusBadRequest, `run_missed \"maybe\"`},
		{"POST", "/jobs/report/run?by=bob", "tok", map[string]string{"Idempotency-Key": "r-1"}, http.StatusAccepted, `"state": "pending"`},
		{"POST", "/jobs/report/run?by=carol", "tok", map[string]string{"Idempotency-Key": "r-1"}, http.StatusOK, `"by": "bob"`},
		{"POST", "/jobs/report/run?by=carol", "tok", map[string]string{"Idempotency-Key": "r-1"}, http.StatusOK, `"id_kept_for": "24h0m0s",
  "id_kept_per_job": 50`},
	} {
		code, body := b.call(t, c.method, c.path, c.token, c.hdr)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.method, c.path, code, body, c.code, c.want)
		}
	}
	// A request id of another job, through the leader, which knows it.
	if code, body := a.call(t, "POST", "/jobs/other/run", "tok", map[string]string{"Idempotency-Key": "r-1"}); code != http.StatusConflict {
		t.Errorf("run now of another job with id r-1: %d %s, want 409", code, body)
	}
	var req control.RunRequest
	waitUntil(t, "r-1 done", func() bool {
		code, body := b.call(t, "GET", "/runs/r-1", "", nil)
		return code == http.StatusOK && json.Unmarshal([]byte(body), &req) == nil && req.State == control.StateDone
	})
	ti, _ := a.el.Term()
	if req.Instance != "a" || req.Token != ti.Token || req.Result != "ok" || req.By != "bob" || req.Via != "b" {
		t.Errorf("request r-1 = %+v, want run by a with token %d, ok, asked by bob through b", req, ti.Token)
	}
	if got := rs.manual(); len(got) != 1 || got[0] != (schedulerhost.Manual{RequestID: "r-1", By: "bob"}) {
		t.Errorf("manual runs = %+v, want one, r-1 by bob (a run now of a paused job runs)", got)
	}
	// Both nodes' /status: the pause, the instances, the term.
	waitUntil(t, "both instances published", func() bool {
		return len(a.n.Status(context.Background(), 0).Instances) == 2
	})
	for _, c := range []*ctlNode{a, b} {
		st := c.n.Status(context.Background(), 5)
		var report *StatusJob
		for i := range st.Jobs {
			if st.Jobs[i].Name == "report" {
				report = &st.Jobs[i]
			}
		}
		if report == nil || report.Paused == nil || report.Paused.By != "alice" || report.Paused.Note != "migration" {
			t.Errorf("%s: /status job report = %+v, want paused by alice", st.Identity.ID, report)
		}
		if len(report.History) != 1 || report.History[0].Kind() != "manual" {
			t.Errorf("%s: report's history %+v, want the manual run", st.Identity.ID, report.History)
		}
		if len(st.Instances) != 2 || !st.Instances[0].Live || !st.Instances[0].Leader || st.Instances[0].JobsDiffer ||
			!st.Instances[1].Live || st.Instances[1].Leader || !st.Instances[1].JobsDiffer || st.Instances[1].Version != "v1" {
			t.Errorf("%s: instances %+v, want a (leader, live) and b (live, job set differs)", st.Identity.ID, st.Instances)
		}
		if len(st.Terms) != 1 || st.Terms[0].Instance != "a" || st.Terms[0].Token != ti.Token || !st.Terms[0].Ended.IsZero() {
			t.Errorf("%s: terms %+v, want a's open term %d", st.Identity.ID, st.Terms, ti.Token)
		}
	}
	// Resume with run_missed: no tick was skipped (the job is yearly), so
	// nothing runs.
	code, body := b.call(t, "POST", "/jobs/report/resume", "tok", nil)
	if code != http.StatusOK || !strings.Contains(body, `"by": "alice"`) || strings.Contains(body, `"run"`) {
		t.Errorf("resume: %d %s", code, body)
	}
	// A step-down ends a's term; its record says so.
	if code, _ := a.call(t, "POST", "/step-down?cooldown=1m", "tok", nil); code != http.StatusAccepted {
		t.Fatalf("step-down: %d", code)
	}
	waitUntil(t, "b leads", b.el.IsLeader)
	waitUntil(t, "a's term recorded as stepped down", func() bool {
		ts, err := control.NewJobs(mem.Control()).Terms(context.Background())
		return err == nil && len(ts) == 2 && ts[1].How == "stepped down" && !ts[1].Ended.IsZero()
	})
}

// Without a control store the endpoints say so.
func TestControl_NoStore(t *testing.T) {
	mem := memory.New(election.Timing{})
	el, host := memParts(t, mem, "a", schedulerhost.Job{Name: "j", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}, 0)
	n, err := New(Config{Elector: el, Host: host, Election: "e", AdminToken: []byte("tok"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	c := &ctlNode{n: n, srv: srv}
	if code, body := c.call(t, "POST", "/jobs/j/pause", "tok", nil); code != http.StatusNotImplemented || !strings.Contains(body, "no control store") {
		t.Errorf("pause without a store: %d %s, want 501", code, body)
	}
}

// A shutdown (SIGTERM: the node's context ends) is recorded as "shut
// down", apart from an operator's step-down.
func TestControl_ShutdownRecordedAsShutDown(t *testing.T) {
	mem := memory.New(election.Timing{})
	var rs jobRuns
	a := newCtlNode(t, mem, "a", "hash-1", rs.job("report", "0 0 0 1 1 *"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.n.Run(ctx, nil) }()
	waitUntil(t, "a leads", a.el.IsLeader)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	ts, err := control.NewJobs(mem.Control()).Terms(context.Background())
	if err != nil || len(ts) != 1 || ts[0].How != "shut down" || ts[0].Ended.IsZero() {
		t.Errorf("terms = %+v (%v), want one ended, how \"shut down\"", ts, err)
	}
}
