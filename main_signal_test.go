package baton_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/internal/etcdtest"
)

// During a long drain, a second signal makes Main exit at once (status 2,
// errExitNow), as `baton run` does; it is not swallowed until the drain
// ends (issue 50, section 3).
func TestMain_SecondSignalExitsAtOnce(t *testing.T) {
	srv := etcdtest.Start(t)
	backend, err := etcd.New(etcd.Config{Endpoints: []string{srv.Endpoint()}, Prefix: "/baton/main-second"})
	if err != nil {
		t.Fatal(err)
	}
	running, release := make(chan struct{}, 1), make(chan struct{})
	cfg := baton.Config{Backend: backend, Election: "main-second", Instance: "one", ShutdownTimeout: time.Minute,
		Jobs: []baton.Job{{Name: "long", Schedule: "* * * * * *", Run: func(context.Context) error {
			select {
			case running <- struct{}{}:
			default:
			}
			<-release // deaf to its context: the drain would wait a minute
			return nil
		}}}}
	stoppedc, done := make(chan (<-chan struct{}), 1), make(chan error, 1)
	go func() {
		stopped, err := baton.RunMainStopped(context.Background(), cfg, syscall.SIGUSR1)
		stoppedc <- stopped
		done <- err
	}()
	defer func() {
		close(release)
		select {
		case stopped := <-stoppedc:
			<-stopped
		case <-time.After(time.Minute):
			t.Error("Main's instance did not stop within a minute of the job's end")
		}
	}()
	select {
	case <-running:
	case <-time.After(20 * time.Second):
		t.Fatal("no run within 20 s")
	}
	_ = syscall.Kill(syscall.Getpid(), syscall.SIGUSR1)
	select {
	case err := <-done:
		t.Fatalf("Main returned %v at the first signal, with the run draining", err)
	case <-time.After(500 * time.Millisecond):
	}
	_ = syscall.Kill(syscall.Getpid(), syscall.SIGUSR1)
	second := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, baton.ErrExitNow) {
			t.Errorf("after the second signal: %v, want %v", err, baton.ErrExitNow)
		}
		t.Logf("returned %v after the second signal: %v", time.Since(second).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		t.Fatal("still draining 5 s after the second signal: it was swallowed")
	}
}
