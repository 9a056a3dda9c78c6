package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/schedulerhost"
)

// memParts returns an Elector and a Host running job, with shutdown as
// the Host's ShutdownTimeout (zero: the default), on the in-memory backend,
// as candidate id of election "e".
func memParts(t *testing.T, mem *memory.Server, id string, job schedulerhost.Job, shutdown time.Duration) (*election.Elector, *schedulerhost.Host) {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs:            []schedulerhost.Job{job},
		ShutdownTimeout: shutdown,
		Ledger:          mem.Ledger(),
		Instance:        id,
		Logger:          discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: id}, Election: "e", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	return el, host
}

// startNode runs n until the test ends.
func startNode(t *testing.T, n *Node) {
	testenv.Background(t, func(ctx context.Context) error { return n.Run(ctx, nil) })
}

func TestNew_Validates(t *testing.T) {
	el, host := memParts(t, memory.New(election.Timing{}), "a",
		schedulerhost.Job{Name: "j", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}, 0)
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; nil: valid
	}{
		{"valid", Config{Elector: el, Host: host, Election: "e"}, nil},
		{"zero", Config{}, []string{"Elector is required", "Host is required", "Election is required"}},
		{"negative cooldown", Config{Elector: el, Host: host, Election: "e", StepDownCooldown: -time.Second},
			[]string{"StepDownCooldown -1s: must not be negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			testenv.WantErrors(t, err, tc.want)
		})
	}
}

// TestNode_Run_LeavesNothingRunning: Run leads, runs the job, and after
// ctx ends returns once the run drained and the lease is released, with no
// goroutine of it left (synctest fails the test otherwise); the verdicts
// follow each step.
func TestNode_Run_LeavesNothingRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(election.Timing{TTL: 5 * time.Second})
		ran := make(chan struct{}, 100)
		el, host := memParts(t, mem, "a", schedulerhost.Job{Name: "j", Schedule: "@every 1s", Run: func(ctx context.Context) error {
			ran <- struct{}{}
			time.Sleep(300 * time.Millisecond) // a graceful stop lets it finish
			return nil
		}}, 0)
		n, err := New(Config{Elector: el, Host: host, Election: "e", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if v := n.Healthy(); v.OK || len(v.Reasons) != 1 || v.Reasons[0] != "election loop not running" {
			t.Errorf("Healthy before Run = %+v", v)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error)
		go func() { done <- n.Run(ctx, nil) }()
		<-ran
		if !n.Healthy().OK || !n.Ready().OK || !el.IsLeader() {
			t.Errorf("while leading: healthy %v, ready %v, leading %v", n.Healthy(), n.Ready(), el.IsLeader())
		}
		stop := errors.New("test over")
		cancel(stop)
		synctest.Wait()
		if v := n.Ready(); v.OK || v.Reasons[0] != "shutting down" {
			t.Errorf("Ready while draining = %+v, want shutting down", v)
		}
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		if host.Running() != 0 || el.IsLeader() {
			t.Errorf("after Run: %d running, leading %v", host.Running(), el.IsLeader())
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
