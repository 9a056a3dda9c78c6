package schedulerhost_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// TestControl_RunNowIdempotencyBound shows the bound of a request id's
// idempotency: the leader keeps a job's RunNowKeptPerJob newest done
// requests, none more than RunNowKeptFor after its end. Within the
// bound a repeated id returns the stored request and runs nothing; past
// it (the 51st newest, or a day later) the same id is a new request and
// runs the job again.
func TestControl_RunNowIdempotencyBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		j := rs.job("j")
		j.Schedule = "@every 1h"
		cfg := schedulerhost.Config{Control: m.Control(), RunNowPoll: 100 * time.Millisecond, Jobs: []schedulerhost.Job{j}}
		n := startNode(t, m, "a", cfg)
		jobs := control.NewJobs(m.Control())
		runsOf := func(id string) int {
			k := 0
			for _, r := range rs.of("j") {
				if r.manual.RequestID == id {
					k++
				}
			}
			return k
		}
		ask := func(id string) bool {
			t.Helper()
			_, made, err := jobs.RequestRun(t.Context(), control.RunRequest{ID: id, Job: "j", By: "bob", At: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			return made
		}
		kept := func(id string) bool {
			t.Helper()
			_, ok, err := jobs.Request(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		done := func(id string) {
			t.Helper()
			var r control.RunRequest
			for range 100 {
				var err error
				if r, _, err = jobs.Request(t.Context(), id); err == nil && r.State == control.StateDone {
					return
				}
				time.Sleep(cfg.RunNowPoll)
			}
			t.Errorf("request %s not done within 100 polls: %s, token %d", id, r.State, r.Token)
		}
		const total = schedulerhost.RunNowKeptPerJob + 1
		for i := range total { // one after another: r00 ends first
			id := fmt.Sprintf("r%02d", i)
			ask(id)
			done(id)
		}
		time.Sleep(5 * cfg.RunNowPoll) // the next poll forgets r00
		for i := range total {
			if got := runsOf(fmt.Sprintf("r%02d", i)); got != 1 {
				t.Errorf("request r%02d ran %d times, want once", i, got)
			}
		}
		if kept("r00") || !kept("r01") {
			t.Errorf("r00 kept %v, r01 kept %v: want the oldest of %d done requests forgotten, the newest %d kept",
				kept("r00"), kept("r01"), total, schedulerhost.RunNowKeptPerJob)
		}
		if ask("r50") {
			t.Error("r50, kept, made again: want the stored request back")
		}
		if !ask("r00") {
			t.Error("r00, forgotten, not made again: want a new request")
		}
		done("r00")
		if a, b := runsOf("r00"), runsOf("r50"); a != 2 || b != 1 {
			t.Errorf("r00 ran %d times, r50 %d: want 2 (its id forgotten) and 1", a, b)
		}
		// A day later, the next leader forgets every request done before.
		n.stop(t)
		time.Sleep(schedulerhost.RunNowKeptFor + time.Minute)
		n = startNode(t, m, "a", cfg)
		time.Sleep(time.Second)
		if kept("r50") {
			t.Errorf("r50 kept %v after its end, want forgotten", schedulerhost.RunNowKeptFor+time.Minute)
		}
		if !ask("r50") {
			t.Error("r50, forgotten, not made again: want a new request")
		}
		done("r50")
		n.stop(t)
		if got := runsOf("r50"); got != 2 {
			t.Errorf("r50 ran %d times, want 2 (its id forgotten after a day)", got)
		}
	})
}

// doneWriteStore fails the writes that mark a run-now request done: the
// first lost answers apply the write and report an error (a timeout
// after the server applied it), the next failures apply nothing.
type doneWriteStore struct {
	control.Store
	mu            sync.Mutex
	lostAnswers   int
	failsOutright int
}

func (s *doneWriteStore) Put(ctx context.Context, p control.Put) (int64, error) {
	if !strings.Contains(string(p.Value), `"state":"done"`) || p.Token != 0 {
		return s.Store.Put(ctx, p)
	}
	s.mu.Lock()
	lost, fail := s.lostAnswers > 0, s.lostAnswers == 0 && s.failsOutright > 0
	if lost {
		s.lostAnswers--
	} else if fail {
		s.failsOutright--
	}
	s.mu.Unlock()
	if fail {
		return 0, errors.New("store unreachable")
	}
	v, err := s.Store.Put(ctx, p)
	if lost && err == nil {
		return 0, errors.New("answer lost")
	}
	return v, err
}

// A run-now request whose done write fails is asked again until it is
// done: written after two outright failures, and recognised as written
// when the first write's answer was lost (the retry finds the version
// moved and the request done under this term's token).
func TestControl_RunNowDoneWriteRetried(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lost, fail int
	}{{"failed twice", 0, 2}, {"answer lost", 1, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemory()
				var rs ctlRuns
				once := rs.job("once")
				once.Schedule = "0 0 0 1 1 *"
				st := &doneWriteStore{Store: m.Control(), lostAnswers: tc.lost, failsOutright: tc.fail}
				a := startNode(t, m, "a", schedulerhost.Config{Control: st, Jobs: []schedulerhost.Job{once}})
				time.Sleep(time.Second)
				jobs := control.NewJobs(m.Control())
				if _, _, err := jobs.RequestRun(t.Context(), control.RunRequest{ID: "req-1", Job: "once", By: "bob", At: time.Now(), Via: "a"}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Second)
				req, ok, err := jobs.Request(t.Context(), "req-1")
				a.stop(t)
				if n := len(rs.of("once")); n != 1 {
					t.Errorf("once ran %d times, want 1", n)
				}
				if err != nil || !ok || req.State != control.StateDone || req.Result != ledger.ResultOK {
					t.Errorf("request = %+v, %v, %v; want done, ok", req, ok, err)
				}
			})
		})
	}
}
