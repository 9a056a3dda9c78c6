package schedulerhost

import (
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/election"
)

// The drain: the end of a term, once Lead's term context has ended and
// the loop has returned.
//
// drain marks the term stopping: from then on no tick is admitted, a run
// whose tick is not claimed yet does not start (gateStep), and the queues
// are emptied; runs already started, and the rest of a claimed catch-up
// batch, go on. Then it waits for the runs in flight, for as long as
// Lead's doc says: on a loss it cancels them at once; on a graceful stop
// it cancels them only when ShutdownTimeout has passed. Runs still going
// after that are abandoned: they count in Host.Abandoned and for their
// job's overlap policy until they return.

// drain stops new starts and waits for the runs in flight, as Lead's doc
// says. cause is why the term ended.
func (t *termRun) drain(cause error) error {
	h := t.h
	start := time.Now()
	t.stopping.Store(true)
	for _, j := range h.jobSet() {
		j.mu.Lock()
		j.queue = nil
		j.mu.Unlock()
	}
	n := int(t.inflight.Load())
	if n == 0 {
		t.idleOnce.Do(func() { close(t.idle) })
	}

	wait := func(d time.Duration) bool {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-t.idle:
			return true
		case <-timer.C:
			return false
		}
	}
	lost := errors.Is(cause, election.ErrLeadershipLost) || t.base.Err() != nil
	if lost {
		t.cancelBase(cause)
		h.log.Warn("leadership lost: cancelled runs in flight", "token", t.token, "runs", n, "err", cause)
		wait(h.cfg.ShutdownTimeout)
	} else {
		if n > 0 {
			h.log.Info("draining", "token", t.token, "runs", n, "timeout", h.cfg.ShutdownTimeout)
		}
		if !wait(h.cfg.ShutdownTimeout) {
			n = int(t.inflight.Load())
			h.log.Error("drain timed out: cancelling runs", "token", t.token, "runs", n, "timeout", h.cfg.ShutdownTimeout)
			t.cancelBase(ErrShutdownTimeout)
			wait(h.cfg.KillGrace)
		}
	}
	left := int(t.inflight.Load())
	took := time.Since(start)
	if h.cfg.Observer != nil {
		h.cfg.Observer.Drained(took, left)
	}
	if left > 0 {
		h.log.Error("runs still going after drain", "token", t.token, "runs", left, "took", took.Round(time.Millisecond))
		err := fmt.Errorf("schedulerhost: %d runs still going after drain", left)
		if lost {
			return errors.Join(err, cause)
		}
		return err
	}
	h.log.Info("drained", "token", t.token, "took", took.Round(time.Millisecond))
	if errors.Is(cause, election.ErrLeadershipLost) {
		return cause
	}
	return nil
}
