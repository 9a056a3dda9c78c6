package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// manualPipeline is the pipeline of a run-now run: no claim turn, no
// claim, no pause. marginStep holds its start while the term's lease is
// about to run out unrenewed, as it holds a tick's (margin.go); then
// start, the step that records the request as started (startStep), is
// the last write before the job is called.
func (h *Host) manualPipeline(withTimeout bool, start step) runFunc {
	steps := []step{marginStep, start}
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

// runManual runs request r (taken) of j, then uncounts the run, lets j's
// queued ticks go and records it (finishManual), in that order: the
// record may take seconds of retries, and a later term, maybe on this
// Host, must not take the run for one still going. A run that did not
// start because its term ended first (or its start margin held it until
// then) goes back to pending, for the next leader (putBack).
func (t *termRun) runManual(jobs *control.Jobs, j *jobState, r control.RunRequest) {
	h := t.h
	run := t.newRun(j, r.At, false, false, turn{})
	run.manual = &Manual{RequestID: r.ID, By: r.By}
	h.log.Info("run now", "job", j.Name, "request", r.ID, "by", r.By, "token", t.token)
	back := true // put r back if the run does not start
	h.manualPipeline(j.Timeout > 0, t.startStep(jobs, &r, &back))(run)
	switch {
	case run.ran:
		run.finish = func() { t.finishManual(jobs, r, run) }
	case back:
		err := t.check()
		run.finish = func() { t.putBack(jobs, r, err) }
	default:
		run.finish = func() {}
	}
	t.afterRun(run)
}

// errRequestMoved: a run-now request this term took was changed by
// another writer (a later term) before its start was recorded.
var errRequestMoved = errors.New("the request changed meanwhile")

// startStep records request *req as started, under the term's token,
// right before the job is called; only once that write landed is the job
// called. It updates *req to the request as written, and clears *back if
// the request moved on without this term (no put back then).
func (t *termRun) startStep(jobs *control.Jobs, req *control.RunRequest, back *bool) step {
	return func(next runFunc) runFunc {
		return func(r *tickRun) {
			s, err := t.recordStart(r, jobs, *req)
			if err != nil {
				*back = !errors.Is(err, errRequestMoved)
				t.h.log.Warn("run-now request not started: its start could not be recorded", "job", r.job.Name, "request", req.ID, "token", t.token, "err", err)
				r.over = true
				return
			}
			*req = s
			if err := t.check(); err != nil { // the write was a round trip
				r.termOver(err)
				return
			}
			next(r)
		}
	}
}

// recordStart writes r's start under the term's token. A write whose
// outcome is unknown (its answer lost, or resent and refused for its own
// change) is read back, and made again while r stays taken by the term
// and not started, the term holds and its start margin is left. It
// returns r as written, or why its start is not recorded: the term over,
// or r changed by another writer (errRequestMoved).
func (t *termRun) recordStart(run *tickRun, jobs *control.Jobs, r control.RunRequest) (control.RunRequest, error) {
	wait := 50 * time.Millisecond
	at := t.h.wallNow() // the same in every attempt: a landed one is known by it
	for {
		ctx, cancel := t.termWriteCtx()
		s, err := jobs.Start(ctx, r, t.token, at)
		cancel()
		if err == nil || errors.Is(err, ledger.ErrStaleTerm) {
			return s, err
		}
		ctx, cancel = t.termWriteCtx()
		cur, found, rerr := jobs.Request(ctx, r.ID)
		cancel()
		if rerr == nil {
			switch {
			case !found || cur.State != control.StateTaken || cur.Token != t.token || cur.Instance != t.h.cfg.Instance:
				return r, fmt.Errorf("%w (%s, token %d): %w", errRequestMoved, cur.State, cur.Token, err)
			case cur.Began() && cur.Started.Equal(at):
				return cur, nil // the write landed
			case cur.Began():
				return r, fmt.Errorf("%w: started at %v already", errRequestMoved, cur.Started)
			}
			r = cur
		}
		t.h.log.Warn("recording a run-now run's start failed: asking again", "job", r.Job, "request", r.ID, "token", t.token, "retry_in", wait, "err", err)
		select {
		case <-t.base.Done():
			return r, context.Cause(t.base)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
		if err := t.awaitMargin(run); err != nil {
			return r, err
		}
	}
}

// termWriteCtx bounds a write of the term: ledgerTimeout, the term's
// base context, and its local deadline (a client that does not give up
// on a cancelled context would hold the run past it).
func (t *termRun) termWriteCtx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(t.base, ledgerTimeout)
	if d, ok := election.LocalDeadline(t.base); ok {
		dctx, cancelAt := context.WithDeadline(ctx, d)
		return dctx, func() { cancelAt(); cancel() }
	}
	return ctx, cancel
}

// putBack makes request r, taken by this term and not started (its term
// over: err), pending again, for the next leader. The write is
// conditioned on r's version, not on the term: a later leader that
// settled r meanwhile moved the version.
func (t *termRun) putBack(jobs *control.Jobs, r control.RunRequest, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	if _, uerr := jobs.PutBack(ctx, r, 0); uerr != nil {
		t.h.log.Warn("run-now request taken and not started; putting it back failed", "request", r.ID, "job", r.Job, "err", uerr)
	} else {
		t.h.log.Warn("run-now request not started: term over; pending again", "request", r.ID, "job", r.Job, "err", err)
	}
}
