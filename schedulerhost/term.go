package schedulerhost

import (
	"context"
	"sync"
	"sync/atomic"
)

// termRun is the state of one call of Lead.
type termRun struct {
	h          *Host
	token      uint64
	base       context.Context // parent of every run's context; ends on loss
	cancelBase context.CancelCauseFunc
	cancelLoop context.CancelCauseFunc

	stopping atomic.Bool   // no new runs: the term is ending
	inflight atomic.Int64  // runs admitted and not finished (queued ticks included)
	idle     chan struct{} // closed once stopping and inflight is zero
	idleOnce sync.Once
	calls    atomic.Int64 // job functions called and not returned

	startBuf []starting // reused by fireAll, on the loop's goroutine
}

// live reports whether the term's base context is still open (no lock:
// runs ask on every start and end).
func (t *termRun) live() bool {
	select {
	case <-t.base.Done():
		return false
	default:
		return true
	}
}

// begin counts a run in flight unless the term is stopping. Every true
// begin is matched by one end.
func (t *termRun) begin() bool {
	t.inflight.Add(1)
	if t.stopping.Load() {
		t.end()
		return false
	}
	return true
}

// end uncounts a run; the last one after a stop wakes the drain.
func (t *termRun) end() {
	if t.inflight.Add(-1) == 0 && t.stopping.Load() {
		t.idleOnce.Do(func() { close(t.idle) })
	}
}

// lose ends the term from inside: a ledger said it is stale.
func (t *termRun) lose(err error) {
	t.cancelBase(err)
	t.cancelLoop(err)
}
