package schedulerhost_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/schedulerhost"
)

// heldStore answers the reads of the pauses that start in [from, to) as
// the store was when they started, after hold: a partition that held the
// answer on the wire.
type heldStore struct {
	control.Store
	mu       sync.Mutex
	from, to time.Time
	hold     time.Duration
	held     int
}

func (s *heldStore) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	es, err := s.Store.List(ctx, prefix)
	s.mu.Lock()
	now := time.Now()
	hold := !now.Before(s.from) && now.Before(s.to) && prefix == "pause/"
	if hold {
		s.held++
	}
	s.mu.Unlock()
	if hold {
		time.Sleep(s.hold)
	}
	return es, err
}

// A pause acknowledged while the read of the pauses was on the wire,
// its answer held for a second, stops the run: the slow read is followed
// by another. The etcd-cluster soak of 2026-11-28 (lane 2, job paused,
// tick 21:31:54) started a run 1.1 s after its pause was acknowledged,
// the leader's read held by a partition.
func TestControl_PauseDuringASlowReadStopsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		ctl := &heldStore{Store: m.Control(), hold: time.Second}
		n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, Jobs: []schedulerhost.Job{rs.job("p")}})
		time.Sleep(1500 * time.Millisecond)
		ctl.mu.Lock()
		ctl.from, ctl.to = time.Now().Add(400*time.Millisecond), time.Now().Add(600*time.Millisecond) // the read at 2 s
		ctl.mu.Unlock()
		time.Sleep(time.Second) // 2.5 s: the read of the 2 s tick is held
		pausedAt := time.Now()
		if err := control.NewJobs(m.Control()).Pause(t.Context(), control.Pause{Job: "p", By: "alice", At: pausedAt}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		n.stop(t)
		ctl.mu.Lock()
		held := ctl.held
		ctl.mu.Unlock()
		if held != 1 {
			t.Fatalf("%d reads of the pauses held, want 1 (the 2 s tick's)", held)
		}
		for _, r := range rs.of("p") {
			if r.at.After(pausedAt) {
				t.Errorf("p's tick %v started at %v, after its pause was acknowledged at %v", r.tick.Format("15:04:05"), r.at.Format("15:04:05.000"), pausedAt.Format("15:04:05.000"))
			}
		}
	})
}
