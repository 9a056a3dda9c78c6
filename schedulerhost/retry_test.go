package schedulerhost_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// retryObserver counts what a RetryObserver is told.
type retryObserver struct {
	mu       sync.Mutex
	retried  []int // attempts
	finished []ledger.Result
	at       []time.Time // when each run finished
}

func (o *retryObserver) RunStarted(string, time.Time, time.Duration) {}
func (o *retryObserver) RunFinished(_ string, res ledger.Result, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished = append(o.finished, res)
	o.at = append(o.at, time.Now())
}
func (o *retryObserver) Misfired(string, int)       {}
func (o *retryObserver) OverlapSkipped(string)      {}
func (o *retryObserver) Drained(time.Duration, int) {}
func (o *retryObserver) RunRetried(_ string, n int) {
	o.mu.Lock()
	o.retried = append(o.retried, n)
	o.mu.Unlock()
}
func (o *retryObserver) snapshot() ([]int, []ledger.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.retried...), append([]ledger.Result(nil), o.finished...)
}

// attempts records the attempts of runs: when, which, of which tick.
type attempts struct {
	mu    sync.Mutex
	at    []time.Time
	n     []int
	ticks []time.Time
}

func (a *attempts) add(ctx context.Context) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	tk, _ := schedulerhost.TickFromContext(ctx)
	a.at = append(a.at, time.Now())
	a.n = append(a.n, schedulerhost.AttemptFromContext(ctx))
	a.ticks = append(a.ticks, tk.Time)
	return len(a.at)
}

func (a *attempts) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

// TestHost_RetriesFailFailOK: a run that fails twice and then succeeds
// is three attempts of one tick, under one claim, each backoff doubling;
// its history entry says ok, with 3 attempts.
func TestHost_RetriesFailFailOK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var a attempts
		o := &retryObserver{}
		n := startNode(t, m, "a", schedulerhost.Config{Observer: o, Jobs: []schedulerhost.Job{{
			Name: "flaky", Schedule: "0 * * * * *", Retries: 3, RetryBackoff: time.Second,
			Run: func(ctx context.Context) error {
				if a.add(ctx) < 3 {
					return errors.New("flaked")
				}
				return nil
			},
		}}})
		claimsBefore := m.ClaimCalls()
		time.Sleep(90 * time.Second) // one tick, at 1m
		n.stop(t)
		if len(a.at) != 3 {
			t.Fatalf("%d attempts, want 3", len(a.at))
		}
		tick := a.ticks[0]
		for i := range a.at {
			if !a.ticks[i].Equal(tick) || a.n[i] != i+1 {
				t.Errorf("attempt %d: tick %v, AttemptFromContext %d; want %v, %d", i, a.ticks[i], a.n[i], tick, i+1)
			}
		}
		// Backoff 1s, then 2s (a generous bound: the clock is synctest's).
		for i, want := range []time.Duration{time.Second, 2 * time.Second} {
			if got := a.at[i+1].Sub(a.at[i]); got < want || got > want+100*time.Millisecond {
				t.Errorf("wait before attempt %d: %v, want %v", i+2, got, want)
			}
		}
		if got := m.ClaimCalls() - claimsBefore; got != 1 {
			t.Errorf("%d claims, want 1 (retries belong to the tick's claim)", got)
		}
		hist, err := m.Ledger().History(context.Background(), "flaky", 10)
		if err != nil || len(hist) != 1 {
			t.Fatalf("history = %+v, %v; want one run", hist, err)
		}
		if h := hist[0]; !h.Tick.Equal(tick) || h.Result != ledger.ResultOK || h.Attempts != 3 || h.Error != "" {
			t.Errorf("history entry %+v, want tick %v, ok, 3 attempts", h, tick)
		}
		retried, finished := o.snapshot()
		if len(retried) != 2 || retried[0] != 2 || retried[1] != 3 || len(finished) != 1 || finished[0] != ledger.ResultOK {
			t.Errorf("observer told retries %v, results %v; want [2 3], [ok]", retried, finished)
		}
	})
}

// TestHost_RetriesRunOut: the last attempt's error is the run's, with
// the number of attempts; a job without retries makes one attempt.
func TestHost_RetriesRunOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var a, b attempts
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: []schedulerhost.Job{{
			Name: "broken", Schedule: "0 * * * * *", Retries: 2, RetryBackoff: time.Second, RetryBackoffMax: time.Second,
			Run: func(ctx context.Context) error { return errors.New("attempt " + string(rune('0'+a.add(ctx)))) },
		}, {
			Name: "once", Schedule: "0 * * * * *",
			Run: func(ctx context.Context) error { b.add(ctx); return errors.New("no retry") },
		}}})
		time.Sleep(90 * time.Second)
		n.stop(t)
		if a.count() != 3 || b.count() != 1 {
			t.Fatalf("attempts %d and %d, want 3 and 1", a.count(), b.count())
		}
		if got := a.at[2].Sub(a.at[1]); got != time.Second {
			t.Errorf("second wait %v, want the cap 1s", got)
		}
		hist, _ := m.Ledger().History(context.Background(), "broken", 10)
		if len(hist) != 1 || hist[0].Result != ledger.ResultFailed || hist[0].Attempts != 3 || hist[0].Error != "attempt 3" {
			t.Errorf("history %+v, want one failed run, 3 attempts, the last error", hist)
		}
		hist, _ = m.Ledger().History(context.Background(), "once", 10)
		if len(hist) != 1 || hist[0].Attempts != 1 {
			t.Errorf("history %+v, want one run of 1 attempt", hist)
		}
	})
}

// TestHost_TimeoutIsNotRetried: an attempt cut by the job's Timeout ends
// the run.
func TestHost_TimeoutIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var a attempts
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: []schedulerhost.Job{{
			Name: "slow", Schedule: "0 * * * * *", Retries: 3, Timeout: time.Second,
			Run: func(ctx context.Context) error { a.add(ctx); <-ctx.Done(); return ctx.Err() },
		}}})
		time.Sleep(90 * time.Second)
		n.stop(t)
		hist, _ := m.Ledger().History(context.Background(), "slow", 10)
		if a.count() != 1 || len(hist) != 1 || hist[0].Result != ledger.ResultTimeout || hist[0].Attempts != 1 {
			t.Errorf("%d attempts, history %+v; want 1, one timed-out run", a.count(), hist)
		}
	})
}

// TestHost_FinalErrorIsNotRetried: an attempt whose error wraps ErrFinal
// ends the run as failed, with that error, whatever the retries left.
func TestHost_FinalErrorIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var a attempts
		o := &retryObserver{}
		n := startNode(t, m, "a", schedulerhost.Config{Observer: o, Jobs: []schedulerhost.Job{{
			Name: "refused", Schedule: "0 * * * * *", Retries: 3,
			Run: func(ctx context.Context) error {
				a.add(ctx)
				return fmt.Errorf("stale token: %w", schedulerhost.ErrFinal)
			},
		}}})
		time.Sleep(90 * time.Second)
		n.stop(t)
		hist, _ := m.Ledger().History(context.Background(), "refused", 10)
		if a.count() != 1 || len(hist) != 1 || hist[0].Result != ledger.ResultFailed || hist[0].Attempts != 1 ||
			hist[0].Error != "stale token: final: not retried" {
			t.Errorf("%d attempts, history %+v; want 1, one failed run with the error", a.count(), hist)
		}
		if retried, _ := o.snapshot(); len(retried) != 0 {
			t.Errorf("observer told retries %v, want none", retried)
		}
	})
}

// TestHost_NoRetryAfterShutdown: a graceful stop during the backoff ends
// the run at once, without another attempt.
func TestHost_NoRetryAfterShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var a attempts
		n := startNode(t, m, "a", schedulerhost.Config{ShutdownTimeout: time.Minute, Jobs: []schedulerhost.Job{{
			Name: "flaky", Schedule: "0 * * * * *", Retries: 3, RetryBackoff: 10 * time.Second,
			Run: func(ctx context.Context) error { a.add(ctx); return errors.New("flaked") },
		}}})
		time.Sleep(62 * time.Second) // the first attempt failed at 1m; the retry is due at 1m10s
		start := time.Now()
		n.stop(t)
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("the stop took %v, want the backoff cut short", took)
		}
		hist, _ := m.Ledger().History(context.Background(), "flaky", 10)
		if a.count() != 1 || len(hist) != 1 || hist[0].Result != ledger.ResultFailed || hist[0].Attempts != 1 ||
			!strings.Contains(hist[0].Error, "not retried") {
			t.Errorf("%d attempts, history %+v; want 1, one failed run of 1 attempt, not retried", a.count(), hist)
		}
	})
}

// TestHost_RetryStopsOnLoss, in real time: after a leadership loss during
// the backoff, no attempt follows, and the run ends within 100 ms.
func TestHost_RetryStopsOnLoss(t *testing.T) {
	m := memory.New(election.Timing{TTL: 5 * time.Second})
	o := &retryObserver{}
	var a attempts
	// The loss comes once the Host logged that the attempt failed and it
	// waits to retry (before, 50 ms after the job function's return: a
	// loaded machine could judge the attempt after the loss).
	failed := make(chan struct{}, 1)
	h, err := schedulerhost.New(schedulerhost.Config{Logger: slog.New(backoffWatch{failed}), Ledger: m.Ledger(), Instance: "a", Observer: o,
		Jobs: []schedulerhost.Job{{
			Name: "flaky", Schedule: "@every 1s", Retries: 5, RetryBackoff: 10 * time.Second,
			Run: func(ctx context.Context) error {
				a.add(ctx)
				return errors.New("flaked")
			},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := election.New(election.Config{Backend: m.Candidate(), Identity: election.Identity{ID: "a"}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, h.Lead) }()
	defer func() { cancel(); <-done }()
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("no attempt within 10s")
	}
	lost := time.Now() // in the backoff
	if !m.Revoke() {
		t.Fatal("no lease to revoke")
	}
	deadline := time.After(2 * time.Second)
	for {
		o.mu.Lock()
		var ended time.Time
		if len(o.at) > 0 {
			ended = o.at[0]
		}
		o.mu.Unlock()
		if !ended.IsZero() {
			if took := ended.Sub(lost); took > 100*time.Millisecond {
				t.Errorf("the run ended %v after the loss, want within 100ms", took)
			}
			break
		}
		select {
		case <-deadline:
			t.Fatal("the run did not end within 2s of the loss")
		case <-time.After(time.Millisecond):
		}
	}
	a.mu.Lock()
	first := a.ticks[0]
	var same int
	for _, tk := range a.ticks {
		if tk.Equal(first) {
			same++
		}
	}
	a.mu.Unlock()
	if same != 1 {
		t.Errorf("%d attempts of the tick, want 1 (no retry after the loss)", same)
	}
	retried, finished := o.snapshot()
	if len(retried) != 0 || finished[0] != ledger.ResultFailed {
		t.Errorf("observer told retries %v, results %v; want none, failed first", retried, finished)
	}
}

// TestAttemptFromContext outside a run, and with ContextWithAttempt.
func TestAttemptFromContext(t *testing.T) {
	if n := schedulerhost.AttemptFromContext(context.Background()); n != 0 {
		t.Errorf("AttemptFromContext(Background) = %d, want 0", n)
	}
	if n := schedulerhost.AttemptFromContext(schedulerhost.ContextWithAttempt(context.Background(), 2)); n != 2 {
		t.Errorf("AttemptFromContext(ContextWithAttempt 2) = %d", n)
	}
}

// backoffWatch is a log handler that signals the first "attempt failed:
// retrying" it sees, and drops every record.
type backoffWatch struct{ ch chan struct{} }

func (w backoffWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w backoffWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "attempt failed: retrying" {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
	return nil
}

func (w backoffWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w backoffWatch) WithGroup(string) slog.Handler      { return w }
