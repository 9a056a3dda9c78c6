package baton_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// TestNode_Run_LeavesNothingRunning: Run leads, runs the job, and after
// ctx ends returns once the run drained and the lease is released, with no
// goroutine of it left (synctest fails the test otherwise); the verdicts
// follow each step.
func TestNode_Run_LeavesNothingRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(election.Timing{TTL: 5 * time.Second})
		ran := make(chan struct{}, 100)
		b, err := baton.New(baton.Config{Backend: mem.Candidate(), Election: "e", Instance: "a", Logger: slog.New(slog.DiscardHandler),
			Jobs: []baton.Job{{Name: "j", Schedule: "@every 1s", Run: func(ctx context.Context) error {
				ran <- struct{}{}
				time.Sleep(300 * time.Millisecond) // a graceful stop lets it finish
				return nil
			}}},
			Advanced: baton.Advanced{Ledger: mem.Ledger()}})
		if err != nil {
			t.Fatal(err)
		}
		if v := b.Healthy(); v.OK || len(v.Reasons) != 1 || v.Reasons[0] != "election loop not running" {
			t.Errorf("Healthy before Run = %+v", v)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error)
		go func() { done <- b.Run(ctx) }()
		<-ran
		if !b.Healthy().OK || !b.Ready().OK || !b.Leading() {
			t.Errorf("while leading: healthy %v, ready %v, leading %v", b.Healthy(), b.Ready(), b.Leading())
		}
		stop := errors.New("test over")
		cancel(stop)
		synctest.Wait()
		if v := b.Ready(); v.OK || v.Reasons[0] != "shutting down" {
			t.Errorf("Ready while draining = %+v, want shutting down", v)
		}
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		if baton.RunningOf(b) != 0 || b.Leading() {
			t.Errorf("after Run: %d running, leading %v", baton.RunningOf(b), b.Leading())
		}
		lease, err := mem.Candidate().Acquire(context.Background(), election.Identity{ID: "b"})
		if err != nil {
			t.Fatalf("the lease was not released: %v", err)
		}
		if err := lease.Release(context.Background()); err != nil {
			t.Error(err)
		}
	})
}
