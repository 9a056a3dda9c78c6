package schedulerhost_test

// Tests of job control (control.go, runnow.go): pauses, and run-now
// requests.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// ctlRuns records the runs of jobs: tick, token, manual request.
type ctlRuns struct {
	mu   sync.Mutex
	runs []ctlRun
}

type ctlRun struct {
	job    string
	tick   time.Time
	at     time.Time
	token  uint64
	manual schedulerhost.Manual
}

func (c *ctlRuns) job(name string) schedulerhost.Job {
	return schedulerhost.Job{Name: name, Schedule: "* * * * * *", Run: func(ctx context.Context) error {
		tk, _ := schedulerhost.TickFromContext(ctx)
		tok, _ := election.TokenFromContext(ctx)
		m, _ := schedulerhost.ManualFromContext(ctx)
		c.mu.Lock()
		c.runs = append(c.runs, ctlRun{job: name, tick: tk.Time, at: time.Now(), token: tok, manual: m})
		c.mu.Unlock()
		return nil
	}}
}

func (c *ctlRuns) of(name string) []ctlRun { return runsOf(&c.mu, &c.runs, name) }

func (r ctlRun) jobName() string { return r.job }

// runsOf returns the runs of job among *runs, read with mu held.
func runsOf[R interface{ jobName() string }](mu *sync.Mutex, runs *[]R, job string) []R {
	mu.Lock()
	defer mu.Unlock()
	var out []R
	for _, r := range *runs {
		if r.jobName() == job {
			out = append(out, r)
		}
	}
	return out
}

// ctlObserver counts what a ControlObserver is told.
type ctlObserver struct {
	retryObserver
	mu      sync.Mutex
	skips   map[string]int
	manual  []ledger.Result
	paused  int
	pausedN int // PausedJobs calls
}

func (o *ctlObserver) TickSkipped(job, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.skips == nil {
		o.skips = map[string]int{}
	}
	o.skips[job+"/"+reason]++
}
func (o *ctlObserver) ManualRunFinished(_ string, r ledger.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.manual = append(o.manual, r)
}
func (o *ctlObserver) PausedJobs(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.paused, o.pausedN = n, o.pausedN+1
}

// TestControl_PauseSkipsFromTheNextTick: a job paused while its Host
// leads runs no tick after the pause; each skipped tick is claimed and
// recorded as skipped, saying who paused it; after the resume it runs
// again, and the skipped ticks are not replayed. Another job is not
// touched. The pauses are read once per instant, not once per job.
func TestControl_PauseSkipsFromTheNextTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		o := &ctlObserver{}
		ctl := &countingStore{Store: m.Control()}
		n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, Observer: o,
			Jobs: []schedulerhost.Job{rs.job("p"), rs.job("q"), rs.job("r")}})
		jobs := control.NewJobs(m.Control())
		time.Sleep(3500 * time.Millisecond)
		lists := ctl.listed()
		pausedAt := time.Now()
		if err := jobs.Pause(t.Context(), control.Pause{Job: "p", By: "alice", At: pausedAt, Note: "db migration"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		if _, err := jobs.Resume(t.Context(), "p"); err != nil {
			t.Fatal(err)
		}
		resumed := time.Now()
		time.Sleep(3 * time.Second)
		n.stop(t)
		var after int
		for _, r := range rs.of("p") {
			if r.tick.After(pausedAt) && r.tick.Before(resumed) {
				t.Errorf("p ran tick %v while paused (%v to %v)", r.tick, pausedAt, resumed)
			}
			if r.tick.After(resumed) {
				after++
			}
		}
		if after < 2 {
			t.Errorf("p ran %d ticks after its resume, want at least 2", after)
		}
		if got := len(rs.of("q")); got < 9 {
			t.Errorf("q ran %d ticks, want every one (10)", got)
		}
		hist := n.history(t, "p", 20)
		skipped := 0
		for _, h := range hist {
			if h.Result == ledger.ResultSkipped {
				skipped++
				if !strings.HasPrefix(h.Error, "paused by alice at ") || !strings.HasSuffix(h.Error, ": db migration") || h.Attempts != 0 {
					t.Errorf("skipped entry %+v, want who paused it and the note, 0 attempts", h)
				}
			}
			if h.CatchUp {
				t.Errorf("history entry %+v: a catch-up, want no replay", h)
			}
		}
		if skipped != 4 {
			t.Errorf("%d skipped entries, want 4 (the ticks in the 4 s paused)", skipped)
		}
		o.mu.Lock()
		if o.skips["p/paused"] != skipped {
			t.Errorf("observer told %d paused skips, want %d", o.skips["p/paused"], skipped)
		}
		o.mu.Unlock()
		// 3 jobs due every second: one read of the pauses per instant.
		if got := ctl.listed() - lists; got > 11 {
			t.Errorf("%d reads of the pauses over 10 instants of 3 jobs, want one per instant", got)
		}
	})
}

// TestControl_PauseHoldsAcrossLeaders: a pause made under one leader
// holds for the next: it runs the paused job 0 times.
func TestControl_PauseHoldsAcrossLeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		cfg := schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{rs.job("p"), rs.job("q")}}
		a := startNode(t, m, "a", cfg)
		time.Sleep(1500 * time.Millisecond)
		pausedAt := pauseNow(t, m.Control(), "p")
		a.stop(t)
		b := startNode(t, m, "b", cfg)
		time.Sleep(5 * time.Second)
		b.stop(t)
		var qOnB int
		for _, r := range rs.of("q") {
			if r.tick.After(pausedAt) {
				qOnB++
			}
		}
		for _, r := range rs.of("p") {
			if r.tick.After(pausedAt) {
				t.Errorf("p ran tick %v after its pause, with token %d", r.tick, r.token)
			}
		}
		if qOnB < 4 {
			t.Errorf("q ran %d ticks under the second leader, want at least 4 (it leads)", qOnB)
		}
	})
}

// TestControl_RunNowOnce: a request sent twice with one id (through any
// instance: it only writes the store) runs once, on the leader, with its
// token; its run knows its request; the history shows it as manual, with
// who asked; a follower's Host never runs it.
func TestControl_RunNowOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		o := &ctlObserver{}
		once := rs.job("once")
		once.Schedule = "0 0 0 1 1 *" // not due in the test
		cfg := schedulerhost.Config{Control: m.Control(), Observer: o, Jobs: []schedulerhost.Job{once}}
		a := startNode(t, m, "a", cfg)
		b := startNode(t, m, "b", cfg)
		time.Sleep(time.Second)
		jobs := control.NewJobs(m.Control())
		for range 2 {
			if _, _, err := jobs.RequestRun(t.Context(), control.RunRequest{ID: "req-7", Job: "once", By: "bob", At: time.Now(), Via: "b"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3 * time.Second)
		runs := rs.of("once")
		leader := a
		if b.host.Leading() {
			leader = b
		}
		l, _ := leader.backend.Leader(t.Context())
		if len(runs) != 1 {
			t.Fatalf("once ran %d times, want 1: %+v", len(runs), runs)
		}
		if r := runs[0]; r.token != l.Token || r.manual != (schedulerhost.Manual{RequestID: "req-7", By: "bob"}) {
			t.Errorf("run %+v, want the leader's token %d and request req-7 by bob", r, l.Token)
		}
		req, ok, err := jobs.Request(t.Context(), "req-7")
		if err != nil || !ok || req.State != control.StateDone || req.Result != ledger.ResultOK || req.Token != l.Token || req.Attempts != 1 {
			t.Errorf("request = %+v, %v, %v; want done, ok, token %d, 1 attempt", req, ok, err, l.Token)
		}
		hist, err := leader.host.History(t.Context(), "once", 10)
		if err != nil || len(hist) != 1 || hist[0].Kind() != "manual" || hist[0].By != "bob" || hist[0].RequestID != "req-7" {
			t.Errorf("History = %+v, %v; want the manual run by bob", hist, err)
		}
		a.stop(t)
		b.stop(t)
		o.mu.Lock()
		defer o.mu.Unlock()
		if len(o.manual) != 1 || o.manual[0] != ledger.ResultOK {
			t.Errorf("observer told manual runs %v, want [ok]", o.manual)
		}
	})
}

// TestControl_RunNowOfARemovedJob and of a request an earlier term took
// and never finished: neither runs; each is closed with the reason.
func TestControl_RequestsNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		job := rs.job("j")
		job.Schedule = "0 0 0 1 1 *"
		jobs := control.NewJobs(m.Control())
		r, _, err := jobs.RequestRun(t.Context(), control.RunRequest{ID: "old", Job: "j", By: "x", At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		r.State, r.Token, r.Instance, r.Started = control.StateTaken, 1, "gone", time.Now()
		if _, err := jobs.Update(t.Context(), r, 0); err != nil {
			t.Fatal(err)
		}
		if _, _, err := jobs.RequestRun(t.Context(), control.RunRequest{ID: "nojob", Job: "removed", By: "x", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		// Token 1 goes to a first term that ends at once.
		first := startNode(t, m, "first", schedulerhost.Config{Jobs: []schedulerhost.Job{job}})
		first.stop(t)
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{job}})
		time.Sleep(2 * time.Second)
		n.stop(t)
		if runs := rs.of("j"); len(runs) != 0 {
			t.Errorf("j ran %d times, want 0", len(runs))
		}
		for id, want := range map[string]string{"old": "the term with token 1 ended before the run finished", "nojob": "job removed is not in the job set of a"} {
			req, ok, err := jobs.Request(t.Context(), id)
			if err != nil || !ok || req.State != control.StateDone || req.Error != want {
				t.Errorf("request %s = %+v, %v, %v; want done with %q", id, req, ok, err, want)
			}
		}
	})
}

// TestControl_PauseStateUnknownFailsClosed: when the pauses cannot be
// read, no tick starts; each is recorded as not started, saying why.
func TestControl_PauseStateUnknownFailsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		ctl := &countingStore{Store: m.Control()}
		ctl.fail.Store(true)
		n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, Jobs: []schedulerhost.Job{rs.job("p")}})
		time.Sleep(2500 * time.Millisecond)
		n.stop(t)
		if runs := rs.of("p"); len(runs) != 0 {
			t.Errorf("p ran %d times while its pause state could not be read, want 0", len(runs))
		}
		hist, _ := m.Ledger().History(t.Context(), "p", 10)
		if len(hist) == 0 {
			t.Fatal("no history entries, want the ticks recorded as not started")
		}
		for _, h := range hist {
			if h.Result != ledger.ResultCancelled || !strings.Contains(h.Error, "not started: pause state unknown: ") {
				t.Errorf("entry %+v, want cancelled, pause state unknown", h)
			}
		}
	})
}

// pauseNow pauses job in st, by alice, at the time it is called, and
// returns when the pause was acknowledged.
func pauseNow(t *testing.T, st control.Store, job string) time.Time {
	t.Helper()
	if err := control.NewJobs(st).Pause(t.Context(), control.Pause{Job: job, By: "alice", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// countingStore counts List calls and, when fail is set, fails them.
type countingStore struct {
	control.Store
	mu    sync.Mutex
	lists int
	fail  atomicBool
	// onList, if set, is called once, at the first read of the pauses.
	onList func()
	// onRunList, likewise, at the next read of the run-now requests.
	onRunList func()
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) Store(v bool) { b.mu.Lock(); b.v = v; b.mu.Unlock() }
func (b *atomicBool) Load() bool   { b.mu.Lock(); defer b.mu.Unlock(); return b.v }

func (s *countingStore) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	s.mu.Lock()
	var hook func()
	switch prefix {
	case "pause/":
		s.lists++
		hook, s.onList = s.onList, nil
	case "run/":
		hook, s.onRunList = s.onRunList, nil
	}
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	if s.fail.Load() {
		return nil, errors.New("store unreachable")
	}
	return s.Store.List(ctx, prefix)
}

func (s *countingStore) listed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// TestControl_TermEndsDuringThePauseRead: the read of the pauses is one
// round trip more between the claim and the start; a term that ends
// meanwhile starts no run (the tick is recorded as claimed, not started).
func TestControl_TermEndsDuringThePauseRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		ctl := &countingStore{Store: m.Control()}
		n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, Jobs: []schedulerhost.Job{rs.job("p")}})
		// The first read of the pauses outlasts the term: the node is cut
		// off from the store, and its lease's local deadline passes.
		ctl.mu.Lock()
		ctl.onList = func() {
			n.backend.Cut()
			time.Sleep(6 * time.Second)
		}
		ctl.mu.Unlock()
		time.Sleep(8 * time.Second)
		n.backend.Heal()
		n.stop(t)
		if runs := rs.of("p"); len(runs) != 0 {
			t.Errorf("p ran %d times although its term ended during the pause read, want 0", len(runs))
		}
		hist, _ := m.Ledger().History(t.Context(), "p", 10)
		if len(hist) == 0 || hist[0].Result != ledger.ResultCancelled || !strings.Contains(hist[0].Error, "not started: term ended") {
			t.Errorf("history %+v, want the claimed tick recorded as not started", hist)
		}
	})
}

// drainObserver records when each drain finished.
type drainObserver struct {
	retryObserver
	mu      sync.Mutex
	drained []time.Time
}

func (o *drainObserver) Drained(time.Duration, int) {
	o.mu.Lock()
	o.drained = append(o.drained, time.Now())
	o.mu.Unlock()
}

// TestControl_TermEndNotHeldByTheRunNowPoll: a read of the run-now
// requests that outlasts the term, in a store client that does not give
// up on a cancelled context (go-redis waits for its read timeout), must
// not hold up the end of the term. The drain, which logs the loss and
// cancels the runs, comes as soon as the loop stops; Lead still waits for
// the poll before it returns. A soak found a Redis leader whose loss was
// logged 3 s late: the ticks between looked neither run nor skipped.
func TestControl_TermEndNotHeldByTheRunNowPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		ctl := &countingStore{Store: m.Control()}
		obs := &drainObserver{}
		n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, Observer: obs, Jobs: []schedulerhost.Job{rs.job("p")}})
		time.Sleep(1500 * time.Millisecond)
		var cut, returned time.Time
		ctl.mu.Lock()
		ctl.onRunList = func() {
			cut = time.Now()
			n.backend.Cut()
			time.Sleep(20 * time.Second) // the store answers nothing
			returned = time.Now()
		}
		ctl.mu.Unlock()
		time.Sleep(25 * time.Second)
		n.backend.Heal()
		n.stop(t)
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if cut.IsZero() || returned.IsZero() {
			t.Fatal("the run-now requests were not read")
		}
		if len(obs.drained) == 0 {
			t.Fatal("no drain")
		}
		// The lease's local deadline comes within its TTL (5 s) of the cut.
		if d := obs.drained[0]; !d.Before(returned) || d.Sub(cut) > 5*time.Second {
			t.Errorf("drained %v after the cut, the poll returned %v after it: the drain waited for the poll",
				obs.drained[0].Sub(cut), returned.Sub(cut))
		}
	})
}

// TestControl_PauseStopsAQueuedTick: a tick queued behind a long run
// (overlap: queue) starts after a pause acknowledged while it waited:
// it must not run. Another job due every second reads the pauses at each
// instant, so a read made after the queued tick's own time exists (the
// one the check used to reuse).
func TestControl_PauseStopsAQueuedTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		var mu sync.Mutex
		var slowAt []time.Time
		slow := schedulerhost.Job{Name: "slow", Schedule: "@every 1s", Overlap: schedulerhost.OverlapQueue, Run: func(ctx context.Context) error {
			mu.Lock()
			slowAt = append(slowAt, time.Now())
			mu.Unlock()
			time.Sleep(2500 * time.Millisecond)
			return nil
		}}
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), ShutdownTimeout: time.Minute,
			Jobs: []schedulerhost.Job{slow, rs.job("other")}})
		start := time.Now()
		// slow runs the tick of +1 s until +3.5 s; the tick of +2 s waits.
		time.Sleep(3200 * time.Millisecond)
		acked := pauseNow(t, m.Control(), "slow")
		time.Sleep(3 * time.Second)
		n.stop(t)
		mu.Lock()
		defer mu.Unlock()
		noneAfter(t, "slow started", slowAt, acked, start)
		hist := n.history(t, "slow", 10)
		skipped := 0
		for _, h := range hist {
			if h.Result == ledger.ResultSkipped {
				skipped++
			}
		}
		if skipped == 0 {
			t.Errorf("no skipped tick in slow's history %+v, want the queued one", hist)
		}
	})
}

// noneAfter fails t for each of times after acked, the moment a pause was
// acknowledged (both shown from start).
func noneAfter(t *testing.T, what string, times []time.Time, acked, start time.Time) {
	t.Helper()
	for _, at := range times {
		if at.After(acked) {
			t.Errorf("%s at +%v, after the pause acknowledged at +%v (all at %v)", what, at.Sub(start), acked.Sub(start), times)
		}
	}
}

// TestControl_PauseStopsTheRetries: a pause acknowledged during a failed
// run's retry backoff stops its later attempts; the run is recorded with
// the attempts made and why it was not retried.
func TestControl_PauseStopsTheRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var mu sync.Mutex
		var attempts []time.Time
		flaky := schedulerhost.Job{Name: "flaky", Schedule: "@every 10s", Retries: 5, RetryBackoff: time.Second, Run: func(ctx context.Context) error {
			mu.Lock()
			attempts = append(attempts, time.Now())
			mu.Unlock()
			return errors.New("boom")
		}}
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{flaky}})
		start := time.Now()
		// Attempts at +10 s and +11 s; the third would be at +13 s.
		time.Sleep(11500 * time.Millisecond)
		acked := pauseNow(t, m.Control(), "flaky")
		time.Sleep(5 * time.Second)
		hist := n.history(t, "flaky", 5)
		n.stop(t)
		mu.Lock()
		defer mu.Unlock()
		noneAfter(t, "an attempt", attempts, acked, start)
		if len(hist) != 1 || hist[0].Attempts != 2 || hist[0].Result != ledger.ResultFailed || !strings.Contains(hist[0].Error, "not retried: paused by alice") {
			t.Errorf("history %+v, want one failed run of 2 attempts, not retried: paused by alice", hist)
		}
	})
}

// TestControl_PauseReadsPerInstant: the check right before the start
// stays one read of the pauses per instant, however many jobs are due at
// it.
func TestControl_PauseReadsPerInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		ctl := &countingStore{Store: m.Control()}
		var jobs []schedulerhost.Job
		for i := range 200 {
			jobs = append(jobs, rs.job(fmt.Sprintf("j%03d", i)))
		}
		n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, Jobs: jobs})
		time.Sleep(1500 * time.Millisecond)
		before := ctl.listed()
		time.Sleep(10 * time.Second)
		got := ctl.listed() - before
		n.stop(t)
		if got > 10 {
			t.Errorf("%d reads of the pauses over 10 instants of 200 jobs, want one per instant", got)
		}
		t.Logf("%d reads of the pauses over 10 instants of 200 jobs", got)
	})
}

// TestControl_TermEndsDuringTheRetrysPauseRead: a retry reads the pauses
// (one round trip) after its backoff; a term that ends during that read
// makes no more attempts. The e2e control suite caught the attempt
// started 47 ms after the loss (Redis, a partition during the read).
func TestControl_TermEndsDuringTheRetrysPauseRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		ctl := &countingStore{Store: m.Control()}
		var mu sync.Mutex
		var attempts []time.Time
		var lost time.Time
		flaky := schedulerhost.Job{Name: "flaky", Schedule: "@every 10s", Retries: 5, RetryBackoff: time.Second, Run: func(ctx context.Context) error {
			mu.Lock()
			attempts = append(attempts, time.Now())
			mu.Unlock()
			return errors.New("boom")
		}}
		n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, Jobs: []schedulerhost.Job{flaky}})
		// The first attempt is at +10 s, its retry's pause read at +11 s.
		time.Sleep(10500 * time.Millisecond)
		ctl.mu.Lock()
		ctl.onList = func() {
			n.backend.Cut()
			time.Sleep(6 * time.Second) // past the lease's local deadline
			mu.Lock()
			lost = time.Now()
			mu.Unlock()
		}
		ctl.mu.Unlock()
		time.Sleep(8 * time.Second)
		n.backend.Heal()
		n.stop(t)
		mu.Lock()
		defer mu.Unlock()
		for _, at := range attempts {
			if !lost.IsZero() && !at.Before(lost) {
				t.Errorf("an attempt at %v, after the term ended during its pause read (read done at %v)", at, lost)
			}
		}
		if len(attempts) != 1 {
			t.Errorf("%d attempts, want 1 (the retry's term ended before it)", len(attempts))
		}
	})
}

// TestControl_PauseDuringAClaimAskedAgain: a tick's claim loses its
// answers for 2.5 s and is asked again; a pause acknowledged meanwhile
// stops the run, though the instant's read of the pauses came before
// the pause (a soak's Consul leader started such a run 1.3 s after the
// pause was acknowledged).
func TestControl_PauseDuringAClaimAskedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var rs ctlRuns
		var slowTick time.Time
		var mu sync.Mutex
		fl := &faultLedger{Ledger: m.Ledger()}
		fl.fault = func(tick, attempt int, c ledger.Claim) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			if c.Job != "j" || (!slowTick.IsZero() && !c.Tick.Equal(slowTick)) {
				return false, nil
			}
			if slowTick.IsZero() && tick >= 2 {
				slowTick = c.Tick
			}
			if c.Tick.Equal(slowTick) && attempt <= 4 {
				return false, errReset // no answer: asked again, for about 2.5 s
			}
			return false, nil
		}
		// k, due at the same instants, reads the pauses at once: the read
		// j's check could reuse.
		n := startNode(t, m, "a", schedulerhost.Config{Ledger: fl, Control: m.Control(), Jobs: []schedulerhost.Job{rs.job("j"), rs.job("k")}})
		// Wait for the slow claim to begin, then pause while it is asked
		// again.
		for {
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			began := !slowTick.IsZero()
			mu.Unlock()
			if began {
				break
			}
		}
		time.Sleep(500 * time.Millisecond)
		acked := pauseNow(t, m.Control(), "j")
		time.Sleep(5 * time.Second)
		n.stop(t)
		for _, r := range rs.of("j") {
			if r.at.After(acked) {
				t.Errorf("tick %v started %v after the pause was acknowledged", r.tick.Format("15:04:05"), r.at.Sub(acked))
			}
		}
	})
}

// slowClaims is a ledger of one claim a batch whose claims of job slow
// take delay to be answered while on.
type slowClaims struct {
	ledger.Ledger
	slow  string
	on    atomic.Bool
	delay time.Duration
}

func (l *slowClaims) MaxBatch() int { return 1 }

func (l *slowClaims) Claim(ctx context.Context, cs []ledger.Claim) []error {
	if l.on.Load() && cs[0].Job == l.slow {
		time.Sleep(l.delay)
	}
	return l.Ledger.Claim(ctx, cs)
}

// TestControl_PauseDuringASlowClaim: the runs of an instant share a read
// of the pauses, made once the first of them is claimed. A claim answered
// 900 ms after the others (a loaded backend) must not start its run on
// that read when a pause was acknowledged meanwhile: the run reads the
// pauses again.
func TestControl_PauseDuringASlowClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		l := &slowClaims{Ledger: m.Ledger(), slow: "j", delay: 900 * time.Millisecond}
		var rs ctlRuns
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Ledger: l, ShutdownTimeout: time.Minute,
			Jobs: []schedulerhost.Job{rs.job("j"), rs.job("other")}})
		start := time.Now()
		time.Sleep(2500 * time.Millisecond) // ticks of +1 s and +2 s ran
		l.on.Store(true)
		time.Sleep(time.Second) // +3.5 s: j's claim of +3 s is out; other's read the pauses
		acked := pauseNow(t, m.Control(), "j")
		time.Sleep(2 * time.Second)
		n.stop(t)
		for _, r := range rs.of("j") {
			if r.at.After(acked) {
				t.Errorf("j's tick %v started at +%v, after the pause acknowledged at +%v", r.tick.Sub(start), r.at.Sub(start), acked.Sub(start))
			}
		}
		hist := n.history(t, "j", 10)
		if len(hist) == 0 || hist[0].Result != ledger.ResultSkipped {
			t.Errorf("j's latest history entry %+v, want the tick of +3 s skipped", hist)
		}
	})
}

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
