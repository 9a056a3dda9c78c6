package httpapi

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
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/schedulerhost"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var waitUntil = envtest.WaitUntil

// TestServer_HealthAfterLoss: /healthz is 200 while leading, 503 while a
// run that ignores its context still goes after the lease was lost, and 200
// again once it returned; /status tells who leads.
func TestServer_HealthAfterLoss(t *testing.T) {
	mem := memory.New(election.Timing{})
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	// Lead waits a minute for the stubborn run: no new campaign meanwhile.
	el, host := memParts(t, mem, "n1", schedulerhost.Job{Name: "stubborn", Schedule: "@every 1s", Run: func(ctx context.Context) error {
		started <- struct{}{}
		<-release // ignores ctx: keeps running after the loss
		return nil
	}}, time.Minute)
	n, err := New(Config{Elector: el, Host: host, Election: "e", Backend: "memory", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()

	if code, _ := get(t, srv, "/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz before the loop runs: %d, want 503", code)
	}
	startNode(t, n)

	<-started
	if code, body := get(t, srv, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while leading: %d %s", code, body)
	}
	if code, _ := get(t, srv, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz while leading: %d", code)
	}
	code, body := get(t, srv, "/status")
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	if !st.Leading || st.Term == nil || st.Leader == nil || st.Leader.Identity.ID != "n1" || st.Term.Token != st.Leader.Token ||
		len(st.Jobs) != 1 || st.Jobs[0].Name != "stubborn" || st.Jobs[0].Next.IsZero() || st.Running != 1 {
		t.Errorf("/status while leading:\n%s", body)
	}

	mem.Revoke()
	waitUntil(t, "not leading", func() bool { return !el.IsLeader() })
	if code, body := get(t, srv, "/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz with a run going after the loss: %d %s, want 503", code, body)
	}
	close(release)
	waitUntil(t, "healthy again", func() bool { return n.Healthy().OK })
	n.stopping.Store(true)
	if code, _ := get(t, srv, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while stopping: %d, want 503", code)
	}
}

// memNode is a node on the in-memory backend, served by httptest, with
// its elector running.
type memNode struct {
	n    *API
	el   *election.Elector
	host *schedulerhost.Host
	srv  *httptest.Server
}

func startMemNode(t *testing.T, mem *memory.Server, id string, token []byte) *memNode {
	t.Helper()
	reg := NewRegistry()
	m, err := metrics.New(reg, "e")
	if err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs:     []schedulerhost.Job{{Name: "j", Schedule: "@every 1h", Run: func(context.Context) error { return nil }}},
		Ledger:   mem.Ledger(),
		Instance: id,
		Observer: m,
		Logger:   discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: id},
		Election: "e", Observer: m, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Elector: el, Host: host, Election: "e", Backend: "memory",
		Registry: reg, AdminToken: token, StepDownCooldown: time.Hour, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(srv.Close)
	envtest.Background(t, func(ctx context.Context) error { return runAPI(ctx, n) })
	return &memNode{n: n, el: el, host: host, srv: srv}
}

var post = envtest.Post

// TestServer_AdminAuth: admin endpoints are 403 with a hint when no token
// is configured, 401 without or with a wrong bearer token, and work with
// the right one; the read-only endpoints need no token.
func TestServer_AdminAuth(t *testing.T) {
	mem := memory.New(election.Timing{})
	off := startMemNode(t, mem, "off", nil)
	on := startMemNode(t, mem, "on", []byte("s3cret"))
	for _, p := range []string{"/step-down", "/standby", "/eligible", "/reload"} {
		code, body := post(t, off.srv.URL+p, "Bearer s3cret")
		if code != http.StatusForbidden || !strings.Contains(body, "--admin-token-file") || !strings.Contains(body, AdminTokenEnv) {
			t.Errorf("POST %s, no token configured: %d %q, want 403 saying how to enable", p, code, body)
		}
		for _, auth := range []string{"", "Bearer", "Bearer wrong", "Bearer s3cret2", "Basic s3cret", "s3cret"} {
			if code, body := post(t, on.srv.URL+p, auth); code != http.StatusUnauthorized {
				t.Errorf("POST %s with Authorization %q: %d %q, want 401", p, auth, code, body)
			}
		}
	}
	if code, _ := post(t, on.srv.URL+"/step-down?cooldown=-1s", "Bearer s3cret"); code != http.StatusBadRequest {
		t.Errorf("cooldown -1s: %d, want 400", code)
	}
	if code, _ := post(t, on.srv.URL+"/step-down?cooldown=soon", "bearer s3cret"); code != http.StatusBadRequest {
		t.Errorf("cooldown soon: %d, want 400", code)
	}
	if code, _ := get(t, on.srv, "/step-down"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /step-down: %d, want 405", code)
	}
	for _, p := range []string{"/", "/status", "/metrics", "/healthz"} {
		if code, _ := get(t, off.srv, p); code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200 without a token", p, code)
		}
	}
	if code, body := post(t, on.srv.URL+"/standby", "Bearer s3cret"); code != http.StatusOK || on.el.Eligible() {
		t.Errorf("POST /standby: %d %s; eligible %v", code, body, on.el.Eligible())
	}
	if code, body := post(t, on.srv.URL+"/eligible", "Bearer  s3cret "); code != http.StatusOK || !on.el.Eligible() {
		t.Errorf("POST /eligible: %d %s; eligible %v", code, body, on.el.Eligible())
	}
}

func memStatus(t *testing.T, srv *httptest.Server) Status {
	t.Helper()
	code, body := get(t, srv, "/status?history=5")
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	return st
}

// TestServer_StepDownStandby: on the in-memory backend, a step-down hands
// leadership to the other node and /status shows the cooldown; a standby
// node never campaigns until made eligible.
func TestServer_StepDownStandby(t *testing.T) {
	mem := memory.New(election.Timing{})
	a := startMemNode(t, mem, "a", []byte("tok"))
	waitUntil(t, "a leading", a.el.IsLeader)
	b := startMemNode(t, mem, "b", []byte("tok"))
	b.el.SetEligible(false)

	code, body := post(t, a.srv.URL+"/step-down?cooldown=1h", "Bearer tok")
	if code != http.StatusAccepted || !strings.Contains(body, `"leading": true`) {
		t.Fatalf("POST /step-down to the leader: %d %s, want 202", code, body)
	}
	waitUntil(t, "a released", func() bool { return !a.el.IsLeader() && !a.host.Leading() })
	st := memStatus(t, a.srv)
	if st.Leading || st.Role != "cooling down" || time.Until(st.CooldownUntil) < 50*time.Minute || !st.Eligible {
		t.Errorf("a after step-down: role %q leading %v cooldown_until %v eligible %v", st.Role, st.Leading, st.CooldownUntil, st.Eligible)
	}
	if st := memStatus(t, b.srv); st.Role != "standby" || !st.Standby || st.Leading {
		t.Errorf("b on standby: role %q standby %v leading %v", st.Role, st.Standby, st.Leading)
	}
	if b.el.IsLeader() {
		t.Fatal("b leads while on standby")
	}
	if code, body := post(t, b.srv.URL+"/eligible", "Bearer tok"); code != http.StatusOK {
		t.Fatalf("POST /eligible: %d %s", code, body)
	}
	waitUntil(t, "b leading once eligible", b.el.IsLeader)
	st = memStatus(t, b.srv)
	if st.Role != "leader" || st.Leader == nil || st.Leader.Identity.ID != "b" || len(st.Jobs) != 1 || st.Jobs[0].Name != "j" {
		t.Errorf("b leading: %+v", st)
	}
	// A step-down to a follower only starts its cooldown.
	if code, body := post(t, a.srv.URL+"/step-down?cooldown=2h", "Bearer tok"); code != http.StatusOK || !strings.Contains(body, "not leading") {
		t.Errorf("POST /step-down to a follower: %d %s", code, body)
	}
	_, m := get(t, a.srv, "/metrics")
	for _, want := range []string{`baton_leader{election="e"} 0`, `baton_eligible{election="e"} 1`,
		`baton_leadership_ended_total{election="e",how="released"} 1`, "go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(m, want) {
			t.Errorf("a's /metrics lacks %q", want)
		}
	}
}

// TestServer_Page: the status page is one self-contained document whose
// CSP allows only its own inline style and script.
func TestServer_Page(t *testing.T) {
	mem := memory.New(election.Timing{})
	a := startMemNode(t, mem, "a", nil)
	resp, err := http.Get(a.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'sha256-") {
		t.Errorf("GET /: %d %q, CSP %q", resp.StatusCode, resp.Header.Get("Content-Type"), csp)
	}
	for _, bad := range []string{"http://", "https://", "innerHTML", "src=", "@import"} {
		if strings.Contains(string(b), bad) {
			t.Errorf("page contains %q: external asset or HTML injection", bad)
		}
	}
	if code, _ := get(t, a.srv, "/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", code)
	}
}

// TestServer_RoleWhileSteppingDown: after POST /step-down, a leader whose
// run still goes reports "leader, stepping down" and the term it drains;
// once the run returned and the lease is released it is cooling down.
func TestServer_RoleWhileSteppingDown(t *testing.T) {
	mem := memory.New(election.Timing{})
	discard := slog.New(slog.DiscardHandler)
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	el, host := memParts(t, mem, "a", schedulerhost.Job{Name: "slow", Schedule: "@every 1s", Run: func(context.Context) error {
		started <- struct{}{}
		<-release
		return nil
	}}, time.Minute)
	n, err := New(Config{Elector: el, Host: host, Election: "e", AdminToken: []byte("tok"), StepDownCooldown: time.Hour, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	startNode(t, n)

	<-started
	before := memStatus(t, srv)
	if before.Role != "leader" || before.Term == nil {
		t.Fatalf("before the step-down: role %q term %+v, want leader", before.Role, before.Term)
	}
	if code, body := post(t, srv.URL+"/step-down", "Bearer tok"); code != http.StatusAccepted {
		t.Fatalf("POST /step-down: %d %s, want 202", code, body)
	}
	st := memStatus(t, srv)
	if !st.Leading || st.Role != "leader, stepping down" || st.Term == nil || st.Term.Token != before.Term.Token || st.Running != 1 {
		t.Errorf("while draining: role %q leading %v term %+v running %d; want the same term stepping down with 1 run",
			st.Role, st.Leading, st.Term, st.Running)
	}
	close(release)
	waitUntil(t, "released", func() bool { return !el.IsLeader() && !host.Leading() })
	if st := memStatus(t, srv); st.Role != "cooling down" || st.Leading || st.CooldownUntil.IsZero() {
		t.Errorf("after the drain: role %q leading %v cooldown_until %v; want cooling down", st.Role, st.Leading, st.CooldownUntil)
	}
}

// ctlNode is a node with a control store on mem, serving its API.
type ctlNode struct {
	n   *API
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
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		header.Set(k, v)
	}
	return envtest.Request(t, method, c.srv.URL+path, header)
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
	go func() { done <- runAPI(ctx, a.n) }()
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
