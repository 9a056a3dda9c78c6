package schedulerhost_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/schedulerhost"
)

// A run-now request taken with less than the start margin left of a
// term whose renewal is overdue does not start, as a scheduled tick does
// not (margin.go): it waits for the renewal, and when the term ends
// instead, the request goes back to pending, taken and never started,
// and the next leader runs it. Started, its process would be stopped
// within milliseconds by the term's end, and the request closed as
// cancelled.
//
// TTL 5 s: a's term opens at 0.9 s, its second renewal is sent at
// 4.233 s and its path cut right after: its deadline is 8.233 s. The
// request is made at 8 s; a's poll of 8.1 s takes it with 133 ms left.
// The server's lease of a expires at 9.233 s, and b leads then.
func TestControl_RunNowHoldsItsStartNearAnUnrenewedDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var logs envtest.Buffer
		m := newMemory()
		type start struct {
			token    uint64
			at, left time.Duration
		}
		var mu sync.Mutex
		var runs []start
		job := schedulerhost.Job{Name: "report", Schedule: "@every 1h", Run: func(ctx context.Context) error {
			if _, ok := schedulerhost.ManualFromContext(ctx); !ok {
				return nil
			}
			d, _ := election.LocalDeadline(ctx)
			tok, _ := election.TokenFromContext(ctx)
			mu.Lock()
			runs = append(runs, start{tok, time.Since(t0), time.Until(d)})
			mu.Unlock()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
				return nil
			}
		}}
		cfg := schedulerhost.Config{Control: m.Control(), ShutdownTimeout: time.Second, RunNowPoll: 200 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), Jobs: []schedulerhost.Job{job}}
		time.Sleep(900 * time.Millisecond)
		a := startNode(t, m, "a", cfg)
		time.Sleep(4300*time.Millisecond - time.Since(t0))
		a.backend.Cut()
		time.Sleep(8*time.Second - time.Since(t0))
		jobs := control.NewJobs(m.Control())
		if _, _, err := jobs.RequestRun(t.Context(), control.RunRequest{ID: "req-1", Job: "report", By: "bob", At: time.Now(), Via: "a"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9*time.Second - time.Since(t0)) // a's term ended at 8.233 s
		synctest.Wait()
		mid, _, err := jobs.Request(t.Context(), "req-1")
		if err != nil {
			t.Fatal(err)
		}
		b := startNode(t, m, "b", cfg)
		time.Sleep(15*time.Second - time.Since(t0))
		synctest.Wait()
		end, _, err := jobs.Request(t.Context(), "req-1")
		if err != nil {
			t.Fatal(err)
		}
		bTerm, _ := b.elector.Term()
		a.stop(t)
		b.stop(t)

		mu.Lock()
		defer mu.Unlock()
		for _, s := range runs {
			if s.left < 200*time.Millisecond {
				t.Errorf("the run of req-1 by token %d started at %v, %v before its term's deadline", s.token, s.at, s.left.Round(time.Millisecond))
			}
		}
		if mid.State != control.StatePending {
			t.Errorf("req-1 at 9 s, after a's term ended: %s (token %d, result %q: %s), want pending again", mid.State, mid.Token, mid.Result, mid.Error)
		}
		if end.State != control.StateDone || end.Result != "ok" || end.Token != bTerm.Token || len(runs) != 1 {
			t.Errorf("req-1 at 15 s: %s %q by token %d (%s), run %d times %+v; want done ok, run once by b's term (token %d)",
				end.State, end.Result, end.Token, end.Error, len(runs), runs, bTerm.Token)
		}
		t.Logf("req-1 at 9 s: %s (token %d); at 15 s: %s %s by token %d; runs %+v", mid.State, mid.Token, end.State, end.Result, end.Token, runs)
		if log := logs.String(); !t.Failed() && !strings.Contains(log, `msg="run not started: term over" job=report`) {
			t.Errorf("no \"run not started\" for req-1 in the log:\n%s", log)
		}
		if t.Failed() {
			t.Logf("log:\n%s", logs.String())
		}
	})
}
