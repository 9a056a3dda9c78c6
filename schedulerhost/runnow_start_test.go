package schedulerhost_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/schedulerhost"
)

// lostStart applies the first write of a run-now run's start (not of the
// term's record, which has a start too) and loses its answer, and fails the read of the request right after it: the
// Host knows nothing of the start it wrote until it asks again.
type lostStart struct {
	control.Store
	mu       sync.Mutex
	lost     bool // the start was applied, its answer lost
	failRead bool // the next read of the request fails
}

func (s *lostStart) Put(ctx context.Context, p control.Put) (int64, error) {
	v, err := s.Store.Put(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && !s.lost && p.Token != 0 && strings.HasPrefix(p.Key, "run/") && strings.Contains(string(p.Value), `"started"`) {
		s.lost, s.failRead = true, true
		return 0, errors.New("connection reset by peer")
	}
	return v, err
}

func (s *lostStart) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	s.mu.Lock()
	fail := s.failRead && strings.HasPrefix(prefix, "run/")
	s.failRead = s.failRead && !fail
	s.mu.Unlock()
	if fail {
		return nil, errors.New("connection reset by peer")
	}
	return s.Store.List(ctx, prefix)
}

// A run-now run's start whose write landed with its answer lost, and
// whose read-back failed too, is asked again: the second write finds the
// request changed, the read after it shows the start the first one
// wrote, and the run goes on, once.
func TestControl_RunNowStartAnswerLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		st := &lostStart{Store: m.Control()}
		var runs atomic.Int32
		job := schedulerhost.Job{Name: "report", Schedule: "@every 1h", Run: func(ctx context.Context) error {
			if _, ok := schedulerhost.ManualFromContext(ctx); ok {
				runs.Add(1)
			}
			return nil
		}}
		n := startNode(t, m, "a", schedulerhost.Config{Control: st, RunNowPoll: 200 * time.Millisecond, Jobs: []schedulerhost.Job{job}})
		time.Sleep(time.Second)
		jobs := control.NewJobs(m.Control())
		if _, _, err := jobs.RequestRun(t.Context(), control.RunRequest{ID: "req-1", Job: "report", By: "bob", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		r, _, err := jobs.Request(t.Context(), "req-1")
		if err != nil {
			t.Fatal(err)
		}
		ti, _ := n.elector.Term()
		n.stop(t)
		if !st.lost {
			t.Fatal("the start's answer was not lost: the test did not fault it")
		}
		if r.State != control.StateDone || r.Result != "ok" || r.Token != ti.Token || runs.Load() != 1 {
			t.Errorf("req-1: %s %q by token %d (%s), run %d times; want done ok, run once by token %d", r.State, r.Result, r.Token, r.Error, runs.Load(), ti.Token)
		}
	})
}
