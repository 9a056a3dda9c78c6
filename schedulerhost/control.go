package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// Operators' controls (HostConfig.Control): pauses and run-now requests.
//
// Pauses. pauseStep, after the claim, reads the pauses once per instant:
// the first run of an instant starts a read of the store, and every run
// whose tick is not after that read's start shares it, so N jobs due at
// one instant cost one round trip, not N. A paused job's tick stays
// claimed (no later catch-up replays it) and is recorded as skipped; the
// job function is not called. If the pauses cannot be read, the tick is
// not started (fail closed: a paused job must not run because of a
// backend blip) and is recorded as cancelled, saying why. The Host keeps
// no pause state of its own: a new leader reads the store at its first
// tick.
//
// Run now. While leading, a poller lists the requests every RunNowPoll
// (and at once when the term starts). A pending request of a job that is
// not running is taken with a conditional write carrying the term's token
// (so two leaders can never both take it, and a deposed one cannot), then
// run like a tick (its timeout and retries, cancelled on a loss, drained
// on a stop), then finished in the store. While the job runs, its ticks
// meet the overlap policy as if a tick's run were going; a request for a
// job that is running waits for it. A request whose run could not start
// because the term ended goes back to pending; one left taken by an
// earlier term is marked cancelled, never run again (at most once, as a
// tick left running). A run now of a paused job runs: a pause skips
// scheduled ticks only.

// Skip reasons, the reason label of ControlObserver.TickSkipped.
const (
	SkipPaused = "paused"
)

// Run-now requests kept in the store once done: per job, at most
// keepDone, none older than keepDoneFor.
const (
	keepDone    = 50
	keepDoneFor = 24 * time.Hour
)

// ControlObserver is what an Observer may also implement to learn of
// the controls (metrics).
type ControlObserver interface {
	// TickSkipped: a tick of job was claimed and not run, for reason
	// (SkipPaused).
	TickSkipped(job, reason string)
	// ManualRunFinished: a run-now run of job ended with result.
	ManualRunFinished(job string, result ledger.Result)
	// PausedJobs: the leader read the pauses; n jobs are paused.
	PausedJobs(n int)
}

// Manual says that a run is a run-now run, and who asked for it.
type Manual struct {
	RequestID string
	By        string
}

type manualKey struct{}

// ContextWithManual returns a context carrying m, for testing job code
// outside a Host.
func ContextWithManual(ctx context.Context, m Manual) context.Context {
	return context.WithValue(ctx, manualKey{}, m)
}

// ManualFromContext returns the run-now request a job's run context
// belongs to, if it is a run-now run.
func ManualFromContext(ctx context.Context) (Manual, bool) {
	switch m := ctx.Value(manualKey{}).(type) {
	case Manual:
		return m, true
	case *Manual:
		if m != nil {
			return *m, true
		}
	}
	return Manual{}, false
}

// pauseView is a term's latest read of the pauses.
type pauseView struct {
	mu      sync.Mutex
	read    bool      // a read has finished
	start   time.Time // when it started (wall clock)
	pauses  map[string]control.Pause
	err     error
	reading chan struct{} // closed when the read going ends; nil if none
}

// pausesAt returns the pauses as read by a read that started at or after
// tick, reading them if no such read is done or going.
func (t *termRun) pausesAt(tick time.Time) (map[string]control.Pause, error) {
	v := &t.pauses
	for {
		v.mu.Lock()
		if v.reading == nil && v.read && !v.start.Before(tick) {
			ps, err := v.pauses, v.err
			v.mu.Unlock()
			return ps, err
		}
		if ch := v.reading; ch != nil {
			v.mu.Unlock()
			select {
			case <-ch:
			case <-t.base.Done():
				return nil, context.Cause(t.base)
			}
			continue
		}
		ch := make(chan struct{})
		v.reading = ch
		start := t.h.wallNow()
		v.mu.Unlock()
		ps, err := t.readPauses()
		v.mu.Lock()
		v.reading, v.read, v.start, v.pauses, v.err = nil, true, start, ps, err
		close(ch)
		v.mu.Unlock()
		return ps, err
	}
}

// readPauses reads the pauses, trying again within ledgerTimeout.
func (t *termRun) readPauses() (map[string]control.Pause, error) {
	ctx, cancel := context.WithTimeout(t.base, ledgerTimeout)
	defer cancel()
	jobs := control.NewJobs(t.h.cfg.Control)
	wait := 50 * time.Millisecond
	for {
		ps, err := jobs.Pauses(ctx)
		if err == nil {
			if o, ok := t.h.cfg.Observer.(ControlObserver); ok {
				o.PausedJobs(len(ps))
			}
			return ps, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		t.h.log.Warn("reading the pauses failed, asking again", "token", t.token, "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// pauseStep skips the tick of a paused job (see above). It follows
// claimStep, and is in the pipeline only with a Control store.
func pauseStep(next runFunc) runFunc {
	return func(r *tickRun) {
		t := r.t
		ps, err := t.pausesAt(r.tick.Time)
		// The read is a round trip more between the claim and the start:
		// the term may have ended meanwhile.
		if terr := t.check(); terr != nil {
			r.termOver(terr)
			return
		}
		if err != nil {
			t.h.log.Error("run not started: pause state unknown", "job", r.job.Name, "tick", r.tick.Time, "token", t.token, "err", err)
			r.notRun(ledger.ResultCancelled, fmt.Errorf("not started: pause state unknown: %w", err))
			return
		}
		p, paused := ps[r.job.Name]
		if !paused {
			next(r)
			return
		}
		why := fmt.Sprintf("paused by %s at %s", p.By, p.At.UTC().Format(time.RFC3339))
		if p.Note != "" {
			why += ": " + p.Note
		}
		t.h.log.Info("tick skipped: job paused", "job", r.job.Name, "tick", r.tick.Time, "token", t.token, "by", p.By)
		if o, ok := t.h.cfg.Observer.(ControlObserver); ok {
			o.TickSkipped(r.job.Name, SkipPaused)
		}
		r.notRun(ledger.ResultSkipped, errors.New(why))
	}
}

// notRun ends r without calling the job function: it is recorded with
// result and err, 0 attempts.
func (r *tickRun) notRun(result ledger.Result, err error) {
	now, _ := r.t.h.clock.now()
	r.started, r.ended, r.result, r.err, r.ran = now, now, result, err, true
	r.attempt.Store(0)
}

// manualPipeline is the pipeline of a run-now run: no claim turn, no
// claim, no pause.
func (h *Host) manualPipeline(withTimeout bool) runFunc {
	steps := []step{observeStep, retryStep}
	if withTimeout {
		steps = append(steps, timeoutStep)
	}
	steps = append(steps, countStep, recoverStep)
	return chain(callJob, steps...)
}

// pollRunNow runs the run-now requests while ctx (the loop's) lasts.
func (t *termRun) pollRunNow(ctx context.Context) {
	tk := time.NewTicker(t.h.cfg.RunNowPoll)
	defer tk.Stop()
	for {
		t.runNowOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// runNowOnce lists the requests once and acts on each (see above).
func (t *termRun) runNowOnce(ctx context.Context) {
	h := t.h
	jobs := control.NewJobs(h.cfg.Control)
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	reqs, err := jobs.Requests(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("reading run-now requests failed", "token", t.token, "err", err)
		}
		return
	}
	byName := map[string]*jobState{}
	for _, j := range h.jobSet() {
		byName[j.Name] = j
	}
	done := map[string][]control.RunRequest{}
	for _, r := range reqs {
		if ctx.Err() != nil {
			return
		}
		switch r.State {
		case control.StatePending:
			j, ok := byName[r.Job]
			if !ok {
				t.closeRequest(ctx, jobs, r, ledger.ResultFailed, fmt.Sprintf("job %s is not in the job set of %s", r.Job, h.cfg.Instance))
				continue
			}
			t.startManual(ctx, jobs, j, r)
		case control.StateTaken:
			if r.Token < t.token {
				t.closeRequest(ctx, jobs, r, ledger.ResultCancelled, fmt.Sprintf("the term with token %d ended before the run finished", r.Token))
			}
		case control.StateDone:
			done[r.Job] = append(done[r.Job], r)
		}
	}
	now := h.wallNow()
	for _, rs := range done {
		sort.Slice(rs, func(a, b int) bool { return rs[a].Ended.After(rs[b].Ended) })
		for i, r := range rs {
			if i >= keepDone || now.Sub(r.Ended) > keepDoneFor {
				dctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
				if err := jobs.Forget(dctx, r); err != nil && !errors.Is(err, control.ErrVersionMismatch) {
					h.log.Debug("forgetting a run-now request failed", "request", r.ID, "err", err)
				}
				cancel()
			}
		}
	}
}

// closeRequest marks r done with result and why, under the term's token.
func (t *termRun) closeRequest(ctx context.Context, jobs *control.Jobs, r control.RunRequest, result ledger.Result, why string) {
	now := t.h.wallNow()
	r.State, r.Result, r.Error, r.Ended = control.StateDone, result, why, now
	if r.Started.IsZero() {
		r.Started = now
	}
	uctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	if _, err := jobs.Update(uctx, r, t.token); err != nil && !errors.Is(err, control.ErrVersionMismatch) {
		t.h.log.Warn("closing a run-now request failed", "request", r.ID, "job", r.Job, "err", err)
		return
	}
	t.h.log.Warn("run-now request not run", "request", r.ID, "job", r.Job, "by", r.By, "result", result, "why", why)
}

// startManual takes request r of j and starts its run, unless j is
// running or the term is stopping (then r stays pending).
func (t *termRun) startManual(ctx context.Context, jobs *control.Jobs, j *jobState, r control.RunRequest) {
	h := t.h
	j.mu.Lock()
	if j.active > 0 || j.retired.Load() || !t.begin() {
		j.mu.Unlock()
		return
	}
	j.active++
	j.mu.Unlock()
	taken := r
	taken.State, taken.Token, taken.Instance, taken.Started = control.StateTaken, t.token, h.cfg.Instance, h.wallNow()
	uctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	taken, err := jobs.Update(uctx, taken, t.token)
	cancel()
	if err != nil {
		if !errors.Is(err, control.ErrVersionMismatch) {
			h.log.Warn("taking a run-now request failed", "request", r.ID, "job", r.Job, "token", t.token, "err", err)
		}
		go t.runTicks(j, nil, false, false, turn{}, false) // uncounts j and t
		return
	}
	go t.runManual(jobs, j, taken)
}

// runManual runs request r (taken) of j, records it, then lets j's queued
// ticks go and uncounts the run.
func (t *termRun) runManual(jobs *control.Jobs, j *jobState, r control.RunRequest) {
	h := t.h
	defer t.runTicks(j, nil, false, false, turn{}, false)
	if err := t.check(); err != nil {
		// Not started: back to pending, for the next leader.
		back := r
		back.State, back.Token, back.Instance, back.Started = control.StatePending, 0, "", time.Time{}
		ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
		defer cancel()
		if _, uerr := jobs.Update(ctx, back, 0); uerr != nil {
			h.log.Warn("run-now request taken and not started; putting it back failed", "request", r.ID, "job", r.Job, "err", uerr)
		} else {
			h.log.Warn("run-now request not started: term over; pending again", "request", r.ID, "job", r.Job, "err", err)
		}
		return
	}
	run := t.newRun(j, r.At, false, false, turn{})
	run.manual = &Manual{RequestID: r.ID, By: r.By}
	h.log.Info("run now", "job", j.Name, "request", r.ID, "by", r.By, "token", t.token)
	h.manualPipeline(j.Timeout > 0)(run)
	fin := r
	fin.State, fin.Started, fin.Ended, fin.Result, fin.Attempts = control.StateDone, run.started, run.ended, run.result, int(run.attempt.Load())
	if run.err != nil {
		fin.Error = run.err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	if _, err := jobs.Update(ctx, fin, 0); err != nil {
		h.log.Warn("recording a run-now run failed", "request", r.ID, "job", r.Job, "err", err)
	}
	j.mu.Lock()
	j.keep(fin.Run())
	j.mu.Unlock()
	if o, ok := h.cfg.Observer.(ControlObserver); ok {
		o.ManualRunFinished(j.Name, run.result)
	}
}

// mergeManual merges the run-now runs of job (taken or done) into runs,
// newest first by start, at most n.
func mergeManual(runs []ledger.Run, reqs []control.RunRequest, job string, n int) []ledger.Run {
	for _, r := range reqs {
		if r.Job == job && r.State != control.StatePending {
			runs = append(runs, r.Run())
		}
	}
	at := func(r ledger.Run) time.Time {
		if !r.Started.IsZero() {
			return r.Started
		}
		return r.Tick
	}
	slices.SortStableFunc(runs, func(a, b ledger.Run) int { return at(b).Compare(at(a)) })
	if len(runs) > n {
		runs = runs[:n]
	}
	return runs
}
