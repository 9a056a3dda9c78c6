package baton_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/httpapi"
)

// syncBuffer is a log sink that tests read while the instance writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func counterValue(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// The README's program on an etcd nothing answers: it must say so at
// WARN at once, count each failed attempt, and turn /readyz 503 with the
// error after a few in a row, while /healthz stays 200.
func TestRun_UnreachableEtcdIsReported(t *testing.T) {
	addr := closedPort(t)
	backend, err := etcd.New(etcd.Config{Endpoints: []string{"http://" + addr}, Prefix: "/baton/elections/unreachable"})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	var logs syncBuffer
	reg := httpapi.NewRegistry()
	b, err := baton.New(baton.Config{
		Backend: backend, Election: "unreachable", Instance: "one", Registry: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Jobs:   []baton.Job{{Name: "j", Schedule: "@every 1h", Run: func(context.Context) error { return nil }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	start := time.Now()
	// The first warning is due within a couple of seconds; the bound has
	// room for a loaded machine.
	for !strings.Contains(logs.String(), "level=WARN") && time.Since(start) < 15*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	warned := time.Since(start)
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("no WARN in %v with etcd unreachable at %s; the log:\n%s", warned.Round(time.Millisecond), addr, logs.String())
	}
	t.Logf("first WARN after %v", warned.Round(time.Millisecond))
	if !strings.Contains(logs.String(), addr) {
		t.Errorf("the warning does not name the endpoint %s:\n%s", addr, logs.String())
	}
	for b.Ready().OK && time.Since(start) < 30*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	v := b.Ready()
	if v.OK {
		t.Fatalf("Ready: OK %v after the first warning; want not ready, naming the error", time.Since(start).Round(time.Millisecond))
	}
	t.Logf("not ready after %v: %v", time.Since(start).Round(time.Millisecond), v)
	if !strings.Contains(v.String(), addr) {
		t.Errorf("Ready: %q does not name the endpoint %s", v, addr)
	}
	rec := httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "acquire") {
		t.Errorf("GET /readyz: %d %q; want 503 naming the failing acquire", rec.Code, rec.Body.String())
	}
	if h := b.Healthy(); !h.OK {
		t.Errorf("Healthy: %v; want OK (a restart does not mend an unreachable store)", h)
	}
	if n := counterValue(t, reg, "baton_acquire_errors_total"); n < 3 {
		t.Errorf("baton_acquire_errors_total = %v, want 3 or more", n)
	}
	t.Logf("the log:\n%s", logs.String())
	if n := strings.Count(logs.String(), "level=WARN"); n > 2 {
		t.Errorf("%d warnings in %v; want the same error warned once a minute at most:\n%s", n, time.Since(start).Round(time.Millisecond), logs.String())
	}
}
