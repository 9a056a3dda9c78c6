package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/batonhq/baton/ledger"
)

// The run pipeline: what happens to one tick of a job, once admitted
// (admit.go), as a chain of steps, the way robfig/cron composes its
// JobWrappers. Outermost first:
//
//	gateStep     waits for the claim turn and the tick's jitter delay; stops a run of a stopping or lost term
//	claimStep    claims the tick in the ledger (with a Ledger only)
//	pauseStep    records the tick as skipped if its job is paused (with a Control store only; control.go)
//	marginStep   holds the start while the term's lease is about to run out unrenewed (margin.go)
//	traceStep    starts the run's span and ends it after the last attempt (with a Tracer only; tracer.go)
//	observeStep  tells the Observer and the log that the run starts and how it ended
//	retryStep    calls the rest once per attempt: again after a failure, while retries are left (retry.go)
//	timeoutStep  gives the attempt a context that ends after the job's Timeout (with a Timeout only)
//	countStep    counts the call as running; works out its Result
//	recoverStep  turns a panic into an error
//	callJob      calls the job function
//
// A step that does not call next ends the run there: the job function is
// not called. A Host assembles the chain once (New), in two variants, with
// and without timeoutStep; the per-run state travels in the tickRun, which
// is also the run's context, so the chain adds no allocation per run. A
// new per-run policy is one more step here and its test.
//
// Recording the run is not a step: runTicks (run.go) writes a finished
// run's history entry once the job has stopped counting the run as active,
// which only the sequence of runs around it knows.

// runFunc takes a run through the rest of the pipeline. It returns when
// the run is over (or was stopped before it started).
type runFunc func(r *tickRun)

// step is one per-run policy: it wraps the rest of the pipeline.
type step func(next runFunc) runFunc

// chain returns the pipeline that runs steps in order, outermost first,
// then last.
func chain(last runFunc, steps ...step) runFunc {
	for i := len(steps) - 1; i >= 0; i-- {
		last = steps[i](last)
	}
	return last
}

// pipeline assembles the steps a run goes through on this Host: claimStep
// with a Ledger, timeoutStep if withTimeout.
func (h *Host) pipeline(withTimeout bool) runFunc {
	steps := []step{gateStep}
	if h.cfg.Ledger != nil {
		steps = append(steps, claimStep)
	}
	if h.cfg.Control != nil {
		steps = append(steps, pauseStep)
	}
	steps = append(steps, marginStep)
	if h.cfg.Tracer != nil {
		steps = append(steps, traceStep)
	}
	steps = append(steps, observeStep, retryStep)
	if withTimeout {
		steps = append(steps, timeoutStep)
	}
	steps = append(steps, countStep, recoverStep)
	return chain(callJob, steps...)
}

// gateStep waits for the run's claim turn (claim.go) and its tick's jitter
// delay (jitter.go), then lets the run go on unless the term is stopping
// (a run claimed already goes on) or over.
// A run of a term that is over is not started; if claimed, it is recorded
// as claimed but not started.
func gateStep(next runFunc) runFunc {
	return func(r *tickRun) {
		t := r.t
		jitter := r.jitterWait()
		if r.tn.prev != nil || jitter > 0 {
			r.arrive() // the instant's claim batch does not wait while this run waits for its turn or its delay
		}
		waited := r.tn.prev != nil // for the claim of the job's run before
		r.tn.wait(t)
		if jitter > 0 {
			if err := t.sleep(jitter); err != nil && t.base.Err() == nil {
				t.h.log.Info("run not started: term stopping during its jitter delay", "job", r.job.Name, "tick", r.tick.Time, "token", t.token, "jitter", r.delay)
				r.passTurn()
				return
			} // the term over: t.check says so below
		}
		if !r.claimed && t.stopping.Load() {
			r.passTurn()
			r.stopped()
			return
		}
		if err := t.check(); err != nil {
			r.passTurn()
			r.termOver(err)
			return
		}
		if jitter > 0 || waited {
			r.pauseMark = t.markPauses() // pauseStep reads the pauses after the waits
		}
		next(r)
		r.passTurn() // claimStep passed it already, if the run had one
	}
}

// stopped stops r, not claimed yet, before its start: its term is
// stopping, or over if its lease is gone. Either way it says so: no tick
// a leader admitted goes unsaid.
func (r *tickRun) stopped() {
	if err := r.t.check(); err != nil {
		r.termOver(err)
		return
	}
	r.t.h.log.Info("run not started: term stopping", "job", r.job.Name, "tick", r.tick.Time, "token", r.t.token)
}

// termOver stops r before its start: the term is over (err says how).
// It says so at once; a claimed tick's entry, "not started", is written by
// runTicks once the job has stopped counting the run as active: that
// write may take seconds of retries, the process may be stopped
// meanwhile, and the next term, maybe on this Host, must not take the run
// that never started for one still going.
func (r *tickRun) termOver(err error) {
	r.t.h.log.Warn("run not started: term over", "job", r.job.Name, "tick", r.tick.Time, "token", r.t.token, "err", err)
	if r.claimed {
		r.notRun(ledger.ResultCancelled, errNotStarted)
	}
	r.over = true
}

// timeoutStep bounds the attempt by the job's Timeout: the job function's
// context ends with ErrJobTimeout after it.
func timeoutStep(next runFunc) runFunc {
	return func(r *tickRun) {
		parent := r.ctx
		ctx, cancel := context.WithTimeoutCause(parent, r.job.Timeout, ErrJobTimeout)
		defer cancel()
		r.ctx = ctx
		next(r)
		r.ctx = parent
	}
}

// observeStep stamps the run's start (unless traceStep did) and tells the
// Observer (if any; with its context if a ContextObserver) and the log
// that the run starts, with its lateness (from its tick plus its
// jitter delay); once the rest, every attempt, returns, how it ended. A failed run is logged at Error level; the rest at Info,
// and their attributes are not built when Info is off.
func observeStep(next runFunc) runFunc {
	return func(r *tickRun) {
		h, j, tick := r.t.h, r.job, r.tick.Time
		if r.started.IsZero() {
			r.started, r.startedMono = h.clock.now()
		}
		// From the start its jitter delay set; a run now's, from its request.
		lateness := r.started.Sub(tick.Add(r.delay))
		if h.ctxObs != nil {
			h.ctxObs.RunStartedContext(r.ctx, j.Name, tick, lateness)
		} else if h.cfg.Observer != nil {
			h.cfg.Observer.RunStarted(j.Name, tick, lateness)
		}
		logInfo := h.log.Enabled(context.Background(), slog.LevelInfo)
		if logInfo {
			args := []any{"job", j.Name, "tick", tick, "token", r.t.token, "catch_up", r.tick.CatchUp}
			if r.tick.CatchUp {
				args = append(args, "catch_up_from", r.tick.CatchUpFrom)
			}
			args = append(args, "late", lateness.Round(time.Microsecond))
			if r.delay > 0 {
				args = append(args, "jitter", r.delay)
			}
			h.log.Info("run started", args...)
		}
		next(r)
		if !r.ran {
			return
		}
		if h.cfg.Observer != nil {
			h.cfg.Observer.RunFinished(j.Name, r.result, r.took)
		}
		if r.err != nil {
			h.log.Error("run ended", "job", j.Name, "tick", tick, "token", r.t.token, "result", r.result, "took", r.took.Round(time.Microsecond), "attempts", r.attempt.Load(), "err", r.err)
		} else if logInfo {
			h.log.Info("run ended", "job", j.Name, "tick", tick, "token", r.t.token, "result", r.result, "took", r.took.Round(time.Microsecond))
		}
	}
}

// countStep counts the call in Host.Running and in the term's calls (an
// abandoned run counts there until it returns); once it returns, stamps
// the end and works out the Result.
func countStep(next runFunc) runFunc {
	return func(r *tickRun) {
		h, t := r.t.h, r.t
		h.running.Add(1)
		t.calls.Add(1)
		next(r)
		t.calls.Add(-1)
		h.running.Add(-1)
		var endedMono time.Duration
		r.ended, endedMono = h.clock.now()
		r.took = endedMono - r.startedMono
		r.result, r.err = outcome(r.ctx, r.err)
		r.ran = true
	}
}

// outcome says how a run whose function returned err with context ctx
// ended, and adds the context's cause to err if err does not wrap it.
func outcome(ctx context.Context, err error) (ledger.Result, error) {
	if err == nil {
		return ledger.ResultOK, nil
	}
	if ctx.Err() == nil {
		return ledger.ResultFailed, err
	}
	cause := context.Cause(ctx)
	res := ledger.ResultCancelled
	if errors.Is(cause, ErrJobTimeout) {
		res = ledger.ResultTimeout
	}
	if !errors.Is(err, cause) {
		err = fmt.Errorf("%w (cause: %v)", err, cause)
	}
	return res, err
}

// recoverStep turns a panic of the rest of the pipeline into the run's
// error, with the stack.
func recoverStep(next runFunc) runFunc {
	return func(r *tickRun) {
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		next(r)
	}
}

// callJob calls the job function: the end of the pipeline.
func callJob(r *tickRun) { r.err = r.job.Run(r.ctx) }
