package backendtest

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
)

// RunAcquireErrors checks that a candidate that cannot take part in the
// election says so through the Elector, whatever the backend: its
// attempts to acquire are reported (driver.ReportAttempt,
// driver.WatchAttempt) or returned, so that the Elector warns at once,
// counts each failure, and reports AcquireFailing after
// election.AcquireFailingAfter in a row; and that a candidate that only
// waits for the holder is not failing. The store is cut with the
// candidate's Cut, as a network that drops every byte.
func RunAcquireErrors(t *testing.T, h ElectionHarness) {
	var wg sync.WaitGroup
	wg.Go(func() { t.Run("CutStoreIsReported", func(t *testing.T) { testCutReported(t, h) }) })
	wg.Go(func() { t.Run("WaitingIsNotFailing", func(t *testing.T) { testWaitingNotFailing(t, h) }) })
	wg.Wait()
}

// acquireLog records what an Elector logs and counts: the warnings about
// failed attempts, and the failures its Observer is told of.
type acquireLog struct {
	failures atomic.Int64

	mu       sync.Mutex
	warnings []string // the err of each warning
}

func (l *acquireLog) AcquireFailed(error)                   { l.failures.Add(1) }
func (l *acquireLog) Elected(uint64)                        {}
func (l *acquireLog) TermEnded(uint64, time.Duration, bool) {}

func (l *acquireLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *acquireLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *acquireLog) WithGroup(string) slog.Handler            { return l }
func (l *acquireLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn || r.Message != "acquire attempt failed, retrying" {
		return nil
	}
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			msg = a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	l.warnings = append(l.warnings, msg)
	l.mu.Unlock()
	return nil
}

func (l *acquireLog) warned() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.warnings...)
}

// runWatchedElector runs an Elector of c, holding each term until it ends, and
// stops it when t ends.
func runWatchedElector(t *testing.T, c Candidate, id string, log *acquireLog) *election.Elector {
	t.Helper()
	e, err := election.New(election.Config{Backend: c.Backend, Identity: TestIdentity(id), Observer: log, Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx, func(ctx context.Context, _ election.Term) error { <-ctx.Done(); return nil })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return e
}

// within waits until cond holds, checking every 20 ms, for at most d.
func within(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			return cond()
		}
	}
	return true
}

func testCutReported(t *testing.T, h ElectionHarness) {
	newC := h.NewElection(t)
	a := newC(t, "a")
	a.Cut()
	var log acquireLog
	start := time.Now()
	e := runWatchedElector(t, a, "a", &log)
	// Each attempt on a cut network is reported within the renew
	// interval (at least 1 s) or the backend's request timeout; the
	// bound leaves room for a loaded machine.
	bound := 3*h.TTL + 15*time.Second
	if !within(bound, func() bool { return len(log.warned()) > 0 }) {
		t.Fatalf("no warning %v after the store was cut; %d failures counted", time.Since(start).Round(time.Millisecond), log.failures.Load())
	}
	t.Logf("first warning after %v: %s", time.Since(start).Round(time.Millisecond), log.warned()[0])
	if !within(bound, func() bool { return e.AcquireFailing() != nil }) {
		t.Fatalf("AcquireFailing() = nil %v after the store was cut; %d failures counted", time.Since(start).Round(time.Millisecond), log.failures.Load())
	}
	t.Logf("failing after %v: %v", time.Since(start).Round(time.Millisecond), e.AcquireFailing())
	if n := log.failures.Load(); n < election.AcquireFailingAfter {
		t.Errorf("%d failures counted while failing, want %d or more", n, election.AcquireFailingAfter)
	}
	seen := map[string]bool{}
	for _, w := range log.warned() {
		if seen[w] && time.Since(start) < time.Minute {
			t.Errorf("warned twice within %v about %q, want the same error warned once a minute at most", time.Since(start).Round(time.Millisecond), w)
		}
		seen[w] = true
	}
	a.Heal()
	if !within(bound+h.FailoverBound, e.IsLeader) {
		t.Fatalf("not leading %v after the store was healed", bound+h.FailoverBound)
	}
	if err := e.AcquireFailing(); err != nil {
		t.Errorf("AcquireFailing() while leading: %v, want nil", err)
	}
}

func testWaitingNotFailing(t *testing.T, h ElectionHarness) {
	newC := h.NewElection(t)
	a, b := newC(t, "a"), newC(t, "b")
	la := Acquire(t, a.Backend, "a", 10*h.TTL)
	defer Release(t, la)
	var log acquireLog
	e := runWatchedElector(t, b, "b", &log)
	// Waiting for the holder is no failure: across two TTLs of renewals,
	// the follower must never look failing. (A single slow answer on a
	// loaded machine may be counted; three in a row would not be.)
	end := time.Now().Add(max(2*h.TTL, 3*time.Second))
	for time.Now().Before(end) {
		if err := e.AcquireFailing(); err != nil {
			t.Fatalf("a follower waiting for the holder is failing: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e.IsLeader() {
		t.Fatal("the follower leads while the holder renews")
	}
	t.Logf("follower: %d failures counted, warnings %q", log.failures.Load(), log.warned())
}
