package schedulerhost

import (
	"errors"
	"strings"
	"time"

	"github.com/batonhq/baton/ledger"
)

// History: every run that starts, and every claimed tick that does not,
// is recorded twice: in the job's ring of recent runs in memory (Status,
// and History without a ledger) and, with a Ledger, by Ledger.Finish.

// recentRuns is how many runs of each job a Host keeps in memory.
const recentRuns = 10

// pastRun is a Run kept in memory for status pages: compact and nearly
// free of pointers, because a Host may keep thousands of jobs' runs and
// the garbage collector scans them all.
type pastRun struct {
	tick, started, ended int64 // unix nanoseconds
	token                uint64
	attempts             uint8 // at most MaxRetries + 1
	result               uint8
	catchUp              bool
	err                  string
	manual               *Manual // a run-now run's request
}

var resultCodes = []ledger.Result{ledger.ResultRunning, ledger.ResultOK, ledger.ResultFailed, ledger.ResultTimeout, ledger.ResultCancelled, ledger.ResultSkipped, ledger.ResultUnknown}

func resultCode(r ledger.Result) uint8 {
	for i, c := range resultCodes {
		if c == r {
			return uint8(i)
		}
	}
	return 0
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func (j *jobState) keep(r ledger.Run) {
	p := pastRun{tick: nanos(r.Tick), started: nanos(r.Started), ended: nanos(r.Ended), token: r.Token,
		attempts: uint8(min(r.Attempts, 255)), result: resultCode(r.Result), catchUp: r.CatchUp, err: r.Error}
	if r.RequestID != "" {
		p.manual = &Manual{RequestID: r.RequestID, By: r.By}
	}
	if len(j.recent) < recentRuns {
		j.recent = append(j.recent, p)
	} else {
		j.recent[j.oldest] = p
		j.oldest = (j.oldest + 1) % recentRuns
	}
}

// unrecorded returns the recent runs no ledger holds (their claims were
// refused), newest first. j.mu is held.
func (j *jobState) unrecorded(instance string) []ledger.Run {
	var out []ledger.Run
	for _, r := range j.recentNewestFirst(len(j.recent), instance) {
		if strings.HasPrefix(r.Error, refusedPrefix) {
			out = append(out, r)
		}
	}
	return out
}

// recentNewestFirst returns up to n recent runs, newest first. j.mu is
// held.
func (j *jobState) recentNewestFirst(n int, instance string) []ledger.Run {
	out := make([]ledger.Run, 0, min(n, len(j.recent)))
	for i := range len(j.recent) {
		if len(out) == n {
			break
		}
		p := j.recent[(j.oldest+len(j.recent)-1-i)%len(j.recent)]
		r := ledger.Run{Job: j.Name, Tick: fromNanos(p.tick), Instance: instance, Token: p.token, CatchUp: p.catchUp,
			Started: fromNanos(p.started), Ended: fromNanos(p.ended), Result: resultCodes[p.result], Error: p.err, Attempts: int(p.attempts)}
		if p.manual != nil {
			r.RequestID, r.By = p.manual.RequestID, p.manual.By
		}
		out = append(out, r)
	}
	return out
}

// errNotStarted is the error of a claimed tick whose term ended before its
// run could start.
var errNotStarted = errors.New("claimed but not started: term ended")

// finishNotStarted records tick of j, claimed, as not started: the term
// ended before its run could start.
func (t *termRun) finishNotStarted(j *jobState, tick time.Time, catchUp bool) {
	now := t.h.wallNow()
	t.record(j, ledger.Run{Job: j.Name, Tick: tick, Instance: t.h.cfg.Instance, Token: t.token, CatchUp: catchUp,
		Started: now, Ended: now, Result: ledger.ResultCancelled, Error: errNotStarted.Error()})
}

// record keeps r in j's local history and stores it in the ledger.
func (t *termRun) record(j *jobState, r ledger.Run) {
	h := t.h
	t.acct.run(j, r)
	j.mu.Lock()
	j.keep(r)
	j.mu.Unlock()
	if h.cfg.Ledger == nil {
		return
	}
	// Finish is idempotent: a failed write is asked again, with backoff,
	// while the term lasts, so that the entry does not stay "running"
	// (and at least finishRetries times, for an entry written after the
	// term ended or once a stop began: the drain waits for it). What a term could not write, the next one settles
	// (settle.go).
	err := h.finishes.do(r, false)
	for i, wait := 0, finishBackoff; err != nil && (i < finishRetries || t.live() && !t.stopping.Load()); i, wait = i+1, min(2*wait, maxFinishBackoff) {
		h.log.Warn("recording run failed: retrying", "job", r.Job, "tick", r.Tick, "retry_in", wait, "err", err)
		t.sleepOrEnd(wait)
		err = h.finishes.do(r, false)
	}
	if err != nil {
		h.log.Error("recording run failed: gave up: the next leader settles it", "job", r.Job, "tick", r.Tick, "token", r.Token, "result", r.Result, "err", err)
	}
}

// finishRetries and finishBackoff bound the retries of a history write
// that failed after its term ended: waits of 250 ms, 500 ms, 1 s, 2 s and
// 4 s, each attempt itself bounded by ledgerTimeout. While the term lasts
// the waits go on doubling up to maxFinishBackoff.
const (
	finishRetries    = 5
	finishBackoff    = 250 * time.Millisecond
	maxFinishBackoff = 15 * time.Second
)

// sleepOrEnd waits d, or less if the term ends meanwhile (a wait begun
// after its end is the whole d).
func (t *termRun) sleepOrEnd(d time.Duration) {
	timer := t.h.clock.newTimer(d)
	defer timer.Stop()
	done := t.base.Done()
	if !t.live() {
		done = nil
	}
	select {
	case <-timer.C:
	case <-done:
	}
}

// write records r, a finished run, if there is one; runTicks calls it
// once the run no longer counts as active (run.go).
func (t *termRun) write(r *tickRun) {
	switch {
	case r == nil:
	case r.finish != nil:
		r.finish()
	case r.unknown != nil: // its claim failed, the outcome unknown
		t.record(r.job, *r.unknown)
	default:
		t.record(r.job, r.entry())
	}
}

// entry is the history entry of r, a finished run.
func (r *tickRun) entry() ledger.Run {
	e := ledger.Run{Job: r.job.Name, Tick: r.tick.Time, Instance: r.t.h.cfg.Instance, Token: r.t.token, CatchUp: r.tick.CatchUp,
		Started: r.started, Ended: r.ended, Result: r.result, Attempts: int(r.attempt.Load())}
	if r.err != nil {
		e.Error = r.err.Error()
	}
	return e
}
