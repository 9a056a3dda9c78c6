package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/batonhq/baton/election"
)

// Tick identifies one scheduled run: the job and the nominal time the
// schedule gave, not the time the run started.
type Tick struct {
	Job     string
	Time    time.Time
	CatchUp bool // the run stands for ticks missed while nobody led, or skipped over by a wall-clock step
}

type tickKey struct{}

// ContextWithTick returns a context carrying tick, for testing job code
// outside a Host.
func ContextWithTick(ctx context.Context, tick Tick) context.Context {
	return context.WithValue(ctx, tickKey{}, tick)
}

// TickFromContext returns the tick a job's run context belongs to.
func TickFromContext(ctx context.Context) (Tick, bool) {
	switch t := ctx.Value(tickKey{}).(type) {
	case Tick:
		return t, true
	case *Tick:
		return *t, true
	}
	return Tick{}, false
}

// runCtx is a run's context: the term's base context plus the tick, in
// one allocation.
type runCtx struct {
	context.Context
	tick Tick
}

func (c *runCtx) Value(key any) any {
	if key == (tickKey{}) {
		return &c.tick
	}
	return c.Context.Value(key)
}

// runTick runs one tick of j, claimed in turn tn (then whatever the queue
// holds).
func (t *termRun) runTick(j *jobState, tick time.Time, tn turn) {
	var done []Run
	t.runOne(j, tick, false, false, tn, &done)
	t.run(j, nil, false, false, done)
}

// run runs ticks of j one after another (more than one for a run-all
// catch-up), then whatever the queue holds, then returns. done holds runs
// finished and not yet recorded: the last run is recorded (a ledger write)
// after the job stops counting as active, so that write does not make the
// next tick look like an overlap.
func (t *termRun) run(j *jobState, ticks []time.Time, catchUp, claimed bool, done []Run) {
	var one [1]time.Time
	for {
		for i, tick := range ticks {
			for _, r := range done {
				t.record(j, r)
			}
			done = done[:0]
			if !t.runOne(j, tick, catchUp, claimed, turn{}, &done) && claimed {
				// The term ended: record the claimed ticks left as not run.
				for _, rest := range ticks[i+1:] {
					t.finishNotStarted(j, rest, catchUp)
				}
				break
			}
		}
		j.mu.Lock()
		q, take, to := t.nextQueued(j)
		j.mu.Unlock()
		if take {
			one[0] = q.tick
			ticks, catchUp, claimed = one[:], q.catchUp, false
			continue
		}
		if to != nil { // a later term's queue waited for this run
			go to.run(j, []time.Time{q.tick}, q.catchUp, false, nil)
		}
		for _, r := range done {
			t.record(j, r)
		}
		t.end()
		return
	}
}

// runOne claims (unless claimed) in turn tn and runs one tick; a run it
// started is appended to done for the caller to record. It reports whether
// the term is still live afterwards.
func (t *termRun) runOne(j *jobState, tick time.Time, catchUp, claimed bool, tn turn, done *[]Run) bool {
	h := t.h
	tn.wait(t)
	if !claimed && t.stopping.Load() {
		tn.done()
		return true // not started: the term is stopping
	}
	if err := election.CheckTerm(t.base); err != nil {
		tn.done()
		if claimed {
			t.finishNotStarted(j, tick, catchUp)
		}
		h.log.Warn("run not started: term over", "job", j.Name, "tick", tick, "token", t.token, "err", err)
		return false
	}
	if !claimed && h.cfg.Ledger != nil {
		err := t.claim(j, tick, catchUp)
		tn.done()
		if err != nil {
			return !errors.Is(err, election.ErrLeadershipLost)
		}
		// The claim took I/O: check the term again right before the start.
		if err := election.CheckTerm(t.base); err != nil {
			t.finishNotStarted(j, tick, catchUp)
			h.log.Warn("run not started: term over", "job", j.Name, "tick", tick, "token", t.token, "err", err)
			return false
		}
	}

	// The run ends with the term's base context (loss, shutdown timeout);
	// only a Timeout needs a context of its own, registered with the base.
	var ctx context.Context = &runCtx{Context: t.base, tick: Tick{Job: j.Name, Time: tick, CatchUp: catchUp}}
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, j.Timeout, ErrJobTimeout)
		defer cancel()
	}
	started, startedMono := h.clock.now()
	lateness := started.Sub(tick)
	if h.cfg.Observer != nil {
		h.cfg.Observer.RunStarted(j.Name, tick, lateness)
	}
	logInfo := h.log.Enabled(context.Background(), slog.LevelInfo) // skip boxing the attributes when off
	if logInfo {
		h.log.Info("run started", "job", j.Name, "tick", tick, "token", t.token, "catch_up", catchUp, "late", lateness.Round(time.Microsecond))
	}
	h.running.Add(1)
	t.calls.Add(1)
	err := call(ctx, j.Run)
	t.calls.Add(-1)
	h.running.Add(-1)
	ended, endedMono := h.clock.now()
	took := endedMono - startedMono

	res := ResultOK
	if err != nil {
		cause := context.Cause(ctx)
		switch {
		case ctx.Err() != nil && errors.Is(cause, ErrJobTimeout):
			res = ResultTimeout
		case ctx.Err() != nil:
			res = ResultCancelled
		default:
			res = ResultFailed
		}
		if ctx.Err() != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (cause: %v)", err, cause)
		}
	}
	if h.cfg.Observer != nil {
		h.cfg.Observer.RunFinished(j.Name, res, took)
	}
	r := Run{Job: j.Name, Tick: tick, Instance: h.cfg.Instance, Token: t.token, CatchUp: catchUp, Started: started, Ended: ended, Result: res}
	if err != nil {
		r.Error = err.Error()
		h.log.Error("run ended", "job", j.Name, "tick", tick, "token", t.token, "result", res, "took", took.Round(time.Microsecond), "err", err)
	} else if logInfo {
		h.log.Info("run ended", "job", j.Name, "tick", tick, "token", t.token, "result", res, "took", took.Round(time.Microsecond))
	}
	*done = append(*done, r)
	return t.live()
}

func call(ctx context.Context, f func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return f(ctx)
}
