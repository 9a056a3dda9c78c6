package node

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/testenv"
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

var waitUntil = testenv.WaitUntil

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
	n    *Node
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.Run(ctx, nil)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		srv.Close()
	})
	return &memNode{n: n, el: el, host: host, srv: srv}
}

var post = testenv.Post

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
