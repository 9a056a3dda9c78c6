package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Operators' controls (HostConfig.Control): pauses and run-now requests.
//
// Pauses. pauseStep, after the claim, reads the pauses right before the
// run starts: after its jitter delay and after any wait in the overlap
// queue (gateStep marks the reads started by then; pauseStep uses a read
// started later). A pause acknowledged before that read starts stops the
// run; one acknowledged during the read may not, so a read that took over
// slowRead to be answered is followed by one more. Runs that start
// together share one read: the runs an instant fires are marked at once
// (fireAll), so N jobs due at one instant cost one round trip, not N; a
// run that waited (jitter, queue, its claim turn) marks anew and costs a
// read of its own. A failed scheduled run reads the pauses again before
// each retry, and a job paused meanwhile makes no more attempts
// (retry.go). A paused job's tick stays
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
// job that is running waits for it. A take that failed other than as a
// stale term may have been applied with its answer lost: the term reads
// the request again and runs it if it holds it, and the poll runs a
// request the store shows taken by the term and not started by it; a
// term starts a request at most once (runnow.go). The run starts as a
// tick's does, after the start margin (margin.go), and only once the
// request is recorded as started, under the token (control.Jobs.Start).
// A request whose run could not start because the term ended goes back
// to pending. A term fences the store before its first read of the
// requests (control.Jobs.Fence); of the requests an earlier term left
// taken, one never started goes back to pending and runs, one started
// is marked cancelled, never run again (at most once, as a tick left
// running). A run now of a paused job runs: a pause skips scheduled
// ticks only.

// Skip reasons, the reason label of ControlObserver.TickSkipped.
const (
	SkipPaused = "paused"
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

// pauseView is a term's latest read of the pauses. Reads are numbered
// from 1 in the order they start; one goes at a time.
type pauseView struct {
	mu      sync.Mutex
	started uint64 // reads started
	done    uint64 // the number of the last read done (0: none)
	pauses  map[string]control.Pause
	err     error
	took    time.Duration // how long the last read done took to be answered
	reading chan struct{} // closed when the read going ends; nil if none
}

// markPauses returns how many reads of the pauses have started: pausesAfter
// with it returns a read that starts later.
func (t *termRun) markPauses() uint64 {
	v := &t.pauses
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.started
}

// slowRead is how long a read of the pauses may take to be answered and
// still be used alone: a pause acknowledged while a slower one was on the
// wire (a partition held its answer) is not in it, so freshPauses reads
// again.
const slowRead = 50 * time.Millisecond

// freshPauses returns the pauses as read by a read that started after
// mark; if that read took over slowRead to be answered, by the read after
// it (one more, however long it takes).
func (t *termRun) freshPauses(mark uint64) (map[string]control.Pause, error) {
	ps, took, err := t.pausesAfter(mark)
	if err == nil && took > slowRead {
		ps, _, err = t.pausesAfter(t.markPauses())
	}
	return ps, err
}

// pausesAfter returns the pauses as read by a read that started after
// markPauses returned mark, reading them if no such read is done or
// going, and how long that read took. The runs that marked before a read
// started share it.
func (t *termRun) pausesAfter(mark uint64) (map[string]control.Pause, time.Duration, error) {
	v := &t.pauses
	for {
		v.mu.Lock()
		if v.reading == nil && v.done > mark {
			ps, took, err := v.pauses, v.took, v.err
			v.mu.Unlock()
			return ps, took, err
		}
		if ch := v.reading; ch != nil {
			v.mu.Unlock()
			select {
			case <-ch:
			case <-t.base.Done():
				return nil, 0, context.Cause(t.base)
			}
			continue
		}
		ch := make(chan struct{})
		v.reading = ch
		v.started++
		n := v.started
		v.mu.Unlock()
		began := time.Now()
		ps, err := t.readPauses()
		took := time.Since(began)
		v.mu.Lock()
		v.reading, v.done, v.pauses, v.took, v.err = nil, n, ps, took, err
		close(ch)
		v.mu.Unlock()
		return ps, took, err
	}
}

// readPauses reads the pauses, trying again within ledgerTimeout.
func (t *termRun) readPauses() (map[string]control.Pause, error) {
	ctx, cancel := context.WithTimeout(t.base, ledgerTimeout)
	defer cancel()
	// Not past the term's local deadline: the read is a step before a
	// start, and a client that does not give up on a cancelled context
	// (go-redis) would hold the run, and the drain, until its own timeout.
	if d, ok := election.LocalDeadline(t.base); ok {
		var cancelAt context.CancelFunc
		ctx, cancelAt = context.WithDeadline(ctx, d)
		defer cancelAt()
	}
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
		ps, err := t.freshPauses(r.pauseMark)
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
		why := pausedWhy(p)
		t.h.log.Info("tick skipped: job paused", "job", r.job.Name, "tick", r.tick.Time, "token", t.token, "by", p.By)
		if o, ok := t.h.cfg.Observer.(ControlObserver); ok {
			o.TickSkipped(r.job.Name, SkipPaused)
		}
		r.notRun(ledger.ResultSkipped, errors.New(why))
	}
}

// pausedNow reads the pauses afresh (one round trip) and says why r's
// job may not make another attempt: paused, or the pauses unknown (fail
// closed). Empty if it may, or if r is a run-now run or the Host has no
// Control store.
func (r *tickRun) pausedNow() string {
	t := r.t
	if t.h.cfg.Control == nil || r.manual != nil {
		return ""
	}
	ps, err := t.freshPauses(t.markPauses())
	if err != nil {
		return fmt.Sprintf("pause state unknown: %v", err)
	}
	if p, ok := ps[r.job.Name]; ok {
		return pausedWhy(p)
	}
	return ""
}

func pausedWhy(p control.Pause) string {
	why := fmt.Sprintf("paused by %s at %s", p.By, p.At.UTC().Format(time.RFC3339))
	if p.Note != "" {
		why += ": " + p.Note
	}
	return why
}

// notRun ends r without calling the job function: it is recorded with
// result and err, 0 attempts.
func (r *tickRun) notRun(result ledger.Result, err error) {
	now, _ := r.t.h.clock.now()
	r.started, r.ended, r.result, r.err, r.ran = now, now, result, err, true
	r.attempt.Store(0)
}
