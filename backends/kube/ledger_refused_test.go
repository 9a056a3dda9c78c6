package kube_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/kubetest"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// A claim and a finish the apiserver refuses (update on ConfigMaps taken
// from the Role while the term leads, as an operator's edit would) are
// marked ledger.ErrRefused; a Host leading on it says so: each lost tick
// is logged and counted as a refused claim, not as an overlap skip, and
// shown as the job's last run; its ticks run again once the Role is
// mended.
func TestLedger_RoleWithoutUpdateIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	b, setRole := claimer(t, ctx)

	led := &seenLedger{Ledger: b.Ledger()}
	obs := &refusedObserver{}
	var runs atomic.Int64
	host, err := schedulerhost.New(schedulerhost.Config{Ledger: led, Observer: obs, Instance: "pod-0",
		Logger: slog.New(slog.DiscardHandler), Jobs: []schedulerhost.Job{{Name: "j", Schedule: "@every 1s",
			Run: func(context.Context) error { runs.Add(1); return nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	el, stop := lead(t, ctx, b, host)
	defer stop()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("%s: not within the test's time", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("two runs with update on ConfigMaps", func() bool { return runs.Load() >= 2 })

	setRole("get")
	waitFor("three refused claims", func() bool { return obs.count(&obs.refused) >= 3 })
	if n := obs.count(&obs.skipped); n != 0 {
		t.Errorf("%d overlap skips while the claims were refused: no run was going", n)
	}
	for _, err := range led.errors() {
		if !errors.Is(err, ledger.ErrRefused) {
			t.Errorf("claim error %v, want ErrRefused", err)
		}
	}
	if last := host.Status()[0].LastRun; last == nil || !strings.HasPrefix(last.Error, "not started: claim refused: ") || !strings.Contains(last.Error, "403 Forbidden") {
		t.Errorf("Status LastRun %+v, want \"not started: claim refused: ...403 Forbidden...\"", last)
	}
	if !el.IsLeader() {
		t.Error("the leader lost its lease: only its claims were refused")
	}

	setRole("get", "create", "update")
	before := runs.Load()
	waitFor("a run once the Role is mended", func() bool { return runs.Load() > before })
	err = led.Finish(ctx, []ledger.Run{{Job: "j", Tick: time.Now(), Token: 1, Result: ledger.ResultOK}})[0]
	if err != nil {
		t.Errorf("finish once the Role is mended: %v", err)
	}
}

// A run's end that the apiserver refuses to record (update on ConfigMaps
// taken away while it ran) is written again while the term lasts, not
// given up after a few seconds: once the Role is mended, the run's entry
// says ok, not running.
func TestHost_FinishRetriedWhileTheTermLasts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	b, setRole := claimer(t, ctx)
	started, release := make(chan time.Time, 1), make(chan struct{})
	var first atomic.Bool
	host, err := schedulerhost.New(schedulerhost.Config{Ledger: b.Ledger(), Instance: "pod-0", Logger: slog.New(slog.DiscardHandler),
		Jobs: []schedulerhost.Job{{Name: "j", Schedule: "@every 1s", Run: func(ctx context.Context) error {
			if first.CompareAndSwap(false, true) {
				tk, _ := schedulerhost.TickFromContext(ctx)
				started <- tk.Time
				<-release
			}
			return nil
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := lead(t, ctx, b, host)
	defer stop()
	var tick time.Time
	select {
	case tick = <-started:
	case <-ctx.Done():
		t.Fatal("the job did not start")
	}
	setRole("get")
	time.Sleep(2 * time.Second) // RBAC takes the edit in
	close(release)              // the run ends; its end cannot be written
	time.Sleep(15 * time.Second)
	setRole("get", "create", "update")
	var last ledger.Run
	for ctx.Err() == nil {
		runs, err := b.Ledger().History(ctx, "j", ledger.DefaultHistory)
		if err == nil {
			for _, r := range runs {
				if r.Tick.Equal(tick) {
					last = r
				}
			}
		}
		if last.Result == ledger.ResultOK || time.Since(tick) > 60*time.Second {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if last.Result != ledger.ResultOK {
		t.Errorf("the run of %v, whose end was refused for 15 s: %s %q, want ok once the Role was mended", tick, last.Result, last.Error)
	}
}

// lead runs an elector "pod-0" on b, leading with host, until stop or
// ctx's end; stop ends the Run, waits for it and fails t if it returned
// an error.
func lead(t *testing.T, ctx context.Context, b *kube.Backend, host *schedulerhost.Host) (el *election.Elector, stop func()) {
	t.Helper()
	el, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: "pod-0"}, Election: "refused", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- el.Run(rctx, host.Lead) }()
	return el, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// claimer starts an apiserver of its own, with a user bound to a Role
// that may get, create and update ConfigMaps (and use the Lease), and
// returns a backend acting as that user and a function that replaces the
// Role's verbs on ConfigMaps.
func claimer(t *testing.T, ctx context.Context) (*kube.Backend, func(cmVerbs ...string)) {
	t.Helper()
	const token, user = "claimer-token", "claimer"
	srv := kubetest.StartT(t, kubetest.Options{Users: map[string]string{token: user}})
	role := func(cmVerbs ...string) map[string]any {
		return map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
			"metadata": map[string]any{"name": "claimer", "namespace": "default"},
			"rules": []any{
				map[string]any{"apiGroups": []string{"coordination.k8s.io"}, "resources": []string{"leases"}, "verbs": []string{"get", "create", "update", "watch", "list"}},
				map[string]any{"apiGroups": []string{""}, "resources": []string{"configmaps"}, "verbs": cmVerbs},
			}}
	}
	const rolePath = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles"
	admin(t, ctx, srv, http.MethodPost, rolePath, role("get", "create", "update"))
	admin(t, ctx, srv, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "claimer", "namespace": "default"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "claimer"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}},
	})
	c, err := kube.NewClient(kube.ClientConfig{Server: srv.URL, Token: token, CAFile: srv.CAFile, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	b, err := kube.New(kube.Config{Client: c, Name: "refused", Timing: election.Timing{TTL: 15 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	for b.Check(ctx) != nil && ctx.Err() == nil { // RBAC takes the new Role in within moments
		time.Sleep(100 * time.Millisecond)
	}
	return b, func(cmVerbs ...string) { admin(t, ctx, srv, http.MethodPut, rolePath+"/claimer", role(cmVerbs...)) }
}

// seenLedger keeps the claim errors of the ledger it wraps.
type seenLedger struct {
	ledger.Ledger
	mu   sync.Mutex
	errs []error
}

func (l *seenLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	errs := l.Ledger.Claim(ctx, cs)
	l.mu.Lock()
	for _, err := range errs {
		if err != nil {
			l.errs = append(l.errs, err)
		}
	}
	l.mu.Unlock()
	return errs
}

func (l *seenLedger) errors() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// refusedObserver counts refused claims and overlap skips.
type refusedObserver struct {
	mu               sync.Mutex
	refused, skipped int
}

func (o *refusedObserver) RunStarted(string, time.Time, time.Duration)      {}
func (o *refusedObserver) RunFinished(string, ledger.Result, time.Duration) {}
func (o *refusedObserver) Misfired(string, int)                             {}
func (o *refusedObserver) Drained(time.Duration, int)                       {}
func (o *refusedObserver) OverlapSkipped(string)                            { o.mu.Lock(); o.skipped++; o.mu.Unlock() }
func (o *refusedObserver) ClaimRefused(string)                              { o.mu.Lock(); o.refused++; o.mu.Unlock() }

func (o *refusedObserver) count(n *int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return *n
}

// admin sends body as JSON to path with the administrator's token and
// fails t unless the answer is 2xx.
func admin(t *testing.T, ctx context.Context, srv *kubetest.Server, method, path string, body any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+kubetest.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
	}
}
