package schedulerhost_test

import (
	"context"
	"errors"
	"strings"
	"sync"
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

func (c *ctlRuns) of(name string) []ctlRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ctlRun
	for _, r := range c.runs {
		if r.job == name {
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
		hist, err := n.host.History(t.Context(), "p", 20)
		if err != nil {
			t.Fatal(err)
		}
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
		if err := control.NewJobs(m.Control()).Pause(t.Context(), control.Pause{Job: "p", By: "alice", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		pausedAt := time.Now()
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
