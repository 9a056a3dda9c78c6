package envtest

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// Terminate stops a process gracefully: it sends p SIGTERM and waits up
// to grace for exited (closed, or sent to, by the goroutine that waits
// for p); then it kills p and waits for exited again.
func Terminate[T any](p *os.Process, exited <-chan T, grace time.Duration) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = p.Kill()
		<-exited
	}
}

// Background runs run on a goroutine of its own until t ends: a cleanup
// of t cancels the context run was given and waits for run to return.
func Background(t testing.TB, run func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}
