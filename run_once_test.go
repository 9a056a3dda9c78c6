package baton_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
)

// A second Run (or RunServing) of an instance that runs is refused, and
// changes nothing of the running one: it still leads, runs its job, and
// answers 200 on /healthz and /readyz through the real HTTP handler. The
// refused RunServing closes its listener, as RunServing does.
func TestRun_SecondRunRefusedLeavesFirstRunning(t *testing.T) {
	mem := memory.New(election.Timing{})
	var runs atomic.Int64
	b, err := baton.New(baton.Config{
		Backend: mem.Candidate(), Election: "once", Instance: "one",
		Jobs: []baton.Job{{Name: "tick", Schedule: "@every 1s", Run: func(context.Context) error {
			runs.Add(1)
			return nil
		}}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	ctx, stop := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- b.Run(ctx) }()
	defer func() {
		stop()
		if err := <-first; err != nil {
			t.Errorf("first Run = %v, want nil after a clean stop", err)
		}
	}()
	envtest.WaitUntil(t, "the first Run leads and runs its job", func() bool { return b.Leading() && runs.Load() > 0 })

	second, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.Run(second); err == nil || !strings.Contains(err.Error(), "Run called twice") {
		t.Errorf("second Run = %v, want an error saying Run was called twice", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.RunServing(second, ln); err == nil || !strings.Contains(err.Error(), "Run called twice") {
		t.Errorf("RunServing after Run = %v, want an error saying Run was called twice", err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the refused RunServing left its listener open")
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := httpGet(t, srv.URL+path)
		if code != http.StatusOK {
			t.Errorf("GET %s after the refused Runs: %d %q, want 200", path, code, body)
		}
	}
	if v := b.Healthy(); !v.OK {
		t.Errorf("Healthy after the refused Runs: %v", v)
	}
	if v := b.Ready(); !v.OK {
		t.Errorf("Ready after the refused Runs: %v", v)
	}
	before := runs.Load()
	envtest.WaitUntil(t, "the job runs on after the refused Runs", func() bool { return runs.Load() > before })
	if !b.Leading() {
		t.Error("not leading after the refused Runs")
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}
