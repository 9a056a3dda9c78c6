package baton_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/etcdtest"
)

func TestNew_NamesEachMissingField(t *testing.T) {
	_, err := baton.New(baton.Config{Instance: "i"})
	if err == nil {
		t.Fatal("New with no backend, election or jobs: no error")
	}
	for _, want := range []string{"Config.Backend: required", "Config.Election: required", "Config.Jobs: at least one job"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestRun_OnEtcd runs one instance on a real (embedded) etcd: it leads,
// runs its job with the term's token, serves its health, pauses the job
// through job control, and stops cleanly.
func TestRun_OnEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	backend, err := etcd.New(etcd.Config{Client: cli, Prefix: "/baton/elections/test"})
	if err != nil {
		t.Fatal(err)
	}
	var runs, tokens atomic.Int64
	b, err := baton.New(baton.Config{
		Backend: backend, Election: "test", Instance: "one",
		Jobs: []baton.Job{{Name: "tick", Schedule: "* * * * * *", Run: func(ctx context.Context) error {
			if tok, ok := election.TokenFromContext(ctx); ok && tok > 0 {
				tokens.Add(1)
			}
			runs.Add(1)
			return nil
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Jobs() == nil {
		t.Fatal("Jobs: nil on etcd, which has a control store")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for runs.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if runs.Load() < 2 || tokens.Load() != runs.Load() {
		t.Fatalf("in 20 s: %d runs, %d with a token; want 2 or more, all with one", runs.Load(), tokens.Load())
	}
	if !b.Leading() {
		t.Error("Leading: false while its job runs")
	}
	if v := b.Healthy(); !v.OK {
		t.Errorf("Healthy: %v", v)
	}
	rec := httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("GET /healthz: %d %q", rec.Code, rec.Body.String())
	}
	if err := b.Jobs().Pause(ctx, control.Pause{Job: "tick", Note: "test"}); err != nil {
		t.Errorf("Pause: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after its context ended")
	}
	if v := b.Ready(); v.OK {
		t.Error("Ready: OK after Run returned")
	}
}

// The settings of Config.Advanced reach the parts: here the backend's
// kind and where, which /status shows. RunServing serves the HTTP API on
// the listener it is given until the instance stops.
func TestNew_AdvancedThenRunServing(t *testing.T) {
	mem := memory.New(election.Timing{})
	b, err := baton.New(baton.Config{
		Backend: mem.Candidate(), Election: "tuned", Instance: "one",
		Jobs:     []baton.Job{{Name: "j", Schedule: "@every 1h", Run: func(context.Context) error { return nil }}},
		Advanced: baton.Advanced{BackendKind: "memory", BackendWhere: "this process"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.RunServing(ctx, ln) }()
	var status string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + ln.Addr().String() + "/status")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if status = string(body); resp.StatusCode == http.StatusOK {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunServing: %v", err)
	}
	if !strings.Contains(status, `"memory"`) || !strings.Contains(status, `"this process"`) {
		t.Errorf("/status does not show the backend's kind and where: %s", status)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/status"); err == nil {
		t.Error("the listener still serves after RunServing returned")
	}
}

// Bad values of Config's named settings are refused, each with the field
// and the value.
func TestNew_NamesEachBadValue(t *testing.T) {
	_, err := baton.New(baton.Config{
		Backend: memory.New(election.Timing{}).Candidate(), Election: "e", Instance: "i",
		Jobs:            []baton.Job{{Name: "j", Schedule: "@every 1h", Run: func(context.Context) error { return nil }}},
		ShutdownTimeout: -time.Second,
		Advanced: baton.Advanced{KillGrace: -2 * time.Second, RetryPeriod: -3 * time.Second, ReleaseTimeout: -4 * time.Second,
			StepDownCooldown: -5 * time.Second, ReloadSignals: []os.Signal{syscall.SIGHUP}},
	})
	for _, want := range []string{"Config.ShutdownTimeout -1s: must not be negative", "Config.Advanced.KillGrace -2s: must not be negative",
		"Config.Advanced.RetryPeriod -3s: must not be negative", "Config.Advanced.ReleaseTimeout -4s: must not be negative",
		"Config.Advanced.StepDownCooldown -5s: must not be negative", "Config.Advanced.ReloadSignals [hangup]: no Config.Advanced.Reloader"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v; want it to say %q", err, want)
		}
	}
}
