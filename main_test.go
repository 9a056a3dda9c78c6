package baton_test

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/internal/etcdtest"
)

// closeRecorder is an etcd Backend that counts its Close calls.
type closeRecorder struct {
	*etcd.Backend
	closed atomic.Int64
}

func (c *closeRecorder) Close() error {
	c.closed.Add(1)
	return c.Backend.Close()
}

// Main's life on a backend dialed from Endpoints: it leads and runs the
// job, stops cleanly on the signal, and closes the backend once.
func TestMain_RunsUntilASignalThenClosesTheBackend(t *testing.T) {
	srv := etcdtest.Start(t)
	backend, err := etcd.New(etcd.Config{Endpoints: []string{srv.Endpoint()}, Prefix: "/baton/main"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &closeRecorder{Backend: backend}
	var runs atomic.Int64
	ran := make(chan struct{})
	cfg := baton.Config{Backend: rec, Election: "main", Instance: "one", Jobs: []baton.Job{{
		Name: "tick", Schedule: "* * * * * *", Run: func(context.Context) error {
			if runs.Add(1) == 1 {
				close(ran)
			}
			return nil
		},
	}}}
	done := make(chan error, 1)
	go func() { done <- baton.RunMain(context.Background(), cfg, syscall.SIGUSR1) }()
	select {
	case <-ran:
	case <-time.After(20 * time.Second):
		t.Fatal("no run within 20 s")
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the signal: %v, want a clean stop", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20 s after the signal")
	}
	if n := rec.closed.Load(); n != 1 {
		t.Errorf("Close called %d times, want once", n)
	}
	if _, err := backend.Ledger().LastClaimed(context.Background(), []string{"tick"}); err == nil {
		t.Error("the client dialed from Endpoints still answers after Close")
	}
}

// A config New refuses is Main's error, before any signal is watched.
func TestMain_RefusedConfig(t *testing.T) {
	err := baton.RunMain(context.Background(), baton.Config{}, syscall.SIGUSR1)
	if err == nil || !strings.Contains(err.Error(), "Config.Backend: required") {
		t.Fatalf("err = %v, want Config.Backend: required", err)
	}
}
