package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// How long a run-now request, and so its id, is kept once done: per
// job, the RunNowKeptPerJob newest done requests, none more than
// RunNowKeptFor after its end. The leader forgets the others; a request
// made again with the id of one forgotten is a new request and runs the
// job again. The node's API states both bounds in its answers.
const (
	RunNowKeptPerJob = 50
	RunNowKeptFor    = 24 * time.Hour
)

// pollRunNow runs the run-now requests while ctx (the loop's) lasts.
func (t *termRun) pollRunNow(ctx context.Context) {
	tk := time.NewTicker(t.h.cfg.RunNowPoll)
	defer tk.Stop()
	fenced := false
	for {
		t.runNowOnce(ctx, &fenced)
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// runNowOnce lists the requests once and acts on each (see above). The
// term's first poll fences the store first (fenced says it did): no take
// or start of an earlier term lands after the term reads the requests.
func (t *termRun) runNowOnce(ctx context.Context, fenced *bool) {
	h := t.h
	jobs := control.NewJobs(h.cfg.Control)
	if !*fenced {
		fctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		err := jobs.Fence(fctx, t.token)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("fencing the control store failed: run-now requests wait", "token", t.token, "err", err)
			}
			return
		}
		*fenced = true
	}
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
			switch {
			case r.Token < t.token:
				t.settleRequest(ctx, jobs, byName[r.Job], r)
			case r.Token == t.token && !t.startedRequests[requestKey(r)]:
				// Taken by this term, whose take's answer was lost.
				if j, ok := byName[r.Job]; ok {
					t.adoptManual(jobs, j, r)
				}
			}
		case control.StateDone:
			done[r.Job] = append(done[r.Job], r)
		}
	}
	now := h.wallNow()
	for _, rs := range done {
		sort.Slice(rs, func(a, b int) bool { return rs[a].Ended.After(rs[b].Ended) })
		for i, r := range rs {
			if i >= RunNowKeptPerJob || now.Sub(r.Ended) > RunNowKeptFor {
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

// settleRequest settles request r, left taken by an earlier term (see
// control.Jobs.Settle): not started, it is pending again and this term
// takes it if j (r's job, nil if not in the job set) is free; started, it
// is closed as cancelled.
func (t *termRun) settleRequest(ctx context.Context, jobs *control.Jobs, j *jobState, r control.RunRequest) {
	h := t.h
	uctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	s, err := jobs.Settle(uctx, r, t.token, h.wallNow())
	cancel()
	switch {
	case errors.Is(err, ledger.ErrStaleTerm) || errors.Is(err, control.ErrVersionMismatch):
		h.log.Debug("settling a run-now request of an earlier term: changed meanwhile", "request", r.ID, "job", r.Job, "token", t.token, "err", err)
		return
	case err != nil:
		h.log.Warn("settling a run-now request of an earlier term failed", "request", r.ID, "job", r.Job, "token", t.token, "err", err)
		return
	case s.State == control.StateDone:
		h.log.Warn("run-now request not run", "request", r.ID, "job", r.Job, "by", r.By, "result", s.Result, "why", s.Error)
		return
	}
	h.log.Warn("run-now request taken by an earlier term that never started it: pending again", "request", r.ID, "job", r.Job, "taken_by", r.Token, "token", t.token)
	if j != nil {
		t.startManual(ctx, jobs, j, s)
	}
}

// startManual takes request r of j and starts its run, unless j is
// running or the term is stopping (then r stays pending).
func (t *termRun) startManual(ctx context.Context, jobs *control.Jobs, j *jobState, r control.RunRequest) {
	h := t.h
	if !t.beginManual(j) {
		return
	}
	uctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	taken, err := jobs.Take(uctx, r, t.token, h.cfg.Instance)
	cancel()
	if err != nil && !errors.Is(err, ledger.ErrStaleTerm) {
		// The write may have been applied with its answer lost, or
		// resent and refused for the change it made itself: read again.
		var held bool
		if taken, held = t.holdsRequest(ctx, jobs, r.ID); held {
			h.log.Warn("taking a run-now request failed, and the request is this term's: running it", "request", r.ID, "job", r.Job, "token", t.token, "err", err)
			err = nil
		} else if !errors.Is(err, control.ErrVersionMismatch) {
			h.log.Warn("taking a run-now request failed", "request", r.ID, "job", r.Job, "token", t.token, "err", err)
		}
	}
	if err != nil {
		go t.runTicks(j, nil, false, false, turn{}, false, 0) // uncounts j and t
		return
	}
	t.startRequest(jobs, j, taken)
}

// beginManual counts a manual run of j, in j and in t, unless j is
// running or retired or the term is stopping; it says whether it did.
func (t *termRun) beginManual(j *jobState) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.active > 0 || j.retired.Load() || !t.begin() {
		return false
	}
	j.active++
	return true
}

// adoptManual starts request r of j, which the store shows taken by this
// term although the term did not start it (its take's answer was lost),
// unless j is running or the term is stopping (then the next poll tries
// again).
func (t *termRun) adoptManual(jobs *control.Jobs, j *jobState, r control.RunRequest) {
	if !t.beginManual(j) {
		return
	}
	t.h.log.Warn("run-now request taken by this term without its answer: running it", "request", r.ID, "job", r.Job, "token", t.token)
	t.startRequest(jobs, j, r)
}

// startRequest starts the run of r (taken by the term; j and t count it)
// unless the term started it already.
func (t *termRun) startRequest(jobs *control.Jobs, j *jobState, r control.RunRequest) {
	k := requestKey(r)
	if t.startedRequests[k] {
		go t.runTicks(j, nil, false, false, turn{}, false, 0) // uncounts j and t
		return
	}
	if t.startedRequests == nil {
		t.startedRequests = map[string]bool{}
	}
	t.startedRequests[k] = true
	go t.runManual(jobs, j, r)
}

// requestKey tells one request from another: its id and when it was
// asked. A request made again with the id of one forgotten (done long
// ago) is another request.
func requestKey(r control.RunRequest) string {
	return r.ID + " " + strconv.FormatInt(r.At.UnixNano(), 10)
}

// holdsRequest reads request id again, within ledgerTimeout, and says
// whether this term holds it (taken with its token, by this instance).
// If it cannot tell, it returns false: the next poll reads again.
func (t *termRun) holdsRequest(ctx context.Context, jobs *control.Jobs, id string) (control.RunRequest, bool) {
	rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	wait := 50 * time.Millisecond
	for {
		r, found, err := jobs.Request(rctx, id)
		if err == nil {
			return r, found && r.State == control.StateTaken && r.Token == t.token && r.Instance == t.h.cfg.Instance
		}
		select {
		case <-rctx.Done():
			return control.RunRequest{}, false
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// finishManual records run, the run of request r: the request done, with
// its outcome, and the run in its job's recent runs.
func (t *termRun) finishManual(jobs *control.Jobs, r control.RunRequest, run *tickRun) {
	h, j := t.h, run.job
	fin := r
	fin.State, fin.Started, fin.Ended, fin.Result, fin.Attempts = control.StateDone, run.started, run.ended, run.result, int(run.attempt.Load())
	if run.err != nil {
		fin.Error = run.err.Error()
	}
	// The write is unconditional and so idempotent: a failed one is asked
	// again, bounded as a history write is (history.go), so that the
	// request does not stay taken although it ran.
	tried := false
	update := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
		defer cancel()
		_, err := jobs.Update(ctx, fin, 0)
		if tried && errors.Is(err, control.ErrVersionMismatch) {
			// An earlier write whose answer was lost may have landed.
			if cur, ok, rerr := jobs.Request(ctx, r.ID); rerr == nil && ok && cur.State == control.StateDone && cur.Token == fin.Token {
				return nil
			}
		}
		tried = true
		return err
	}
	err := update()
	for i, wait := 0, finishBackoff; err != nil && !errors.Is(err, control.ErrVersionMismatch) && i < finishRetries; i, wait = i+1, 2*wait {
		h.log.Warn("recording a run-now run failed: retrying", "request", r.ID, "job", r.Job, "retry_in", wait, "err", err)
		time.Sleep(wait)
		err = update()
	}
	if err != nil {
		h.log.Error("recording a run-now run failed: gave up", "request", r.ID, "job", r.Job, "err", err)
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
