package schedulerhost

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// termRun is the state of one term: one call of Lead.
//
// It has two contexts. The loop's ends when Lead's context ends (a
// graceful stop or a loss) and stops the schedule loop. The base context,
// parent of every run's context, derives from the Term's context: it ends
// only with the term (a loss), on lose, or when the drain cancels the runs
// still going; so runs go on through a graceful drain. inflight counts the runs admitted and not
// finished, queued ticks included, and the drain waits for it to reach
// zero; calls counts the job functions called and not returned, and a term
// whose calls outlive Lead stays in Host.ended (Host.Abandoned).
type termRun struct {
	h          *Host
	term       election.Term
	token      uint64
	base       context.Context // parent of every run's context; ends on loss
	cancelBase context.CancelCauseFunc
	cancelLoop context.CancelCauseFunc
	loopCtx    context.Context // the loop's: ends when Lead's context ends, or on lose

	stopping atomic.Bool   // no new runs: the term is ending
	inflight atomic.Int64  // runs admitted and not finished (queued ticks included)
	idle     chan struct{} // closed once stopping and inflight is zero
	idleOnce sync.Once
	calls    atomic.Int64 // job functions called and not returned

	startBuf []starting // reused by fireAll, on the loop's goroutine

	// Reloads (reload.go): SetJobs appends the new versions to pending,
	// under Host.mu, and wakes the loop.
	pending []*jobState
	wake    chan struct{} // capacity 1

	margin    time.Duration // the start margin (margin.go), if hasMargin
	hasMargin bool

	claims *batchQueue[ledger.Claim] // the term's claims on their way to the ledger (batch.go); nil without a Ledger

	pauses pauseView // the latest read of the pauses (control.go), with a Control store

	// The run-now requests this term started, by requestKey (runnow.go):
	// a request is started at most once per term, also when the store
	// shows it taken by the term again. Only the run-now poll's goroutine
	// uses it.
	startedRequests map[string]bool

	// covers holds, by coverKey, the first missed tick a run-once
	// catch-up run stands for (catchup.go); newRun puts it in the run's
	// Tick.
	covers sync.Map

	acct *accountant // the term's tick accounting (account.go); nil without a Control store or with NoAccounting

	refused refusals       // the streak of refused claims (refused.go)
	bg      sync.WaitGroup // the term's background work (refused.go, settle.go); Lead waits for it
}

// newTerm returns the state of term, led under ctx, Lead's context. Runs go
// under the term's base context, which ends with term.Context() (loss,
// local deadline, release), not when ctx ends, so that runs drain after a
// graceful stop. The loop goes under loopCtx, which ends with ctx. Either
// also ends on lose.
func (h *Host) newTerm(ctx context.Context, term election.Term) (t *termRun, loopCtx context.Context) {
	base, cancelBase := context.WithCancelCause(term.Context())
	loopCtx, cancelLoop := context.WithCancelCause(ctx)
	t = &termRun{h: h, term: term, token: term.Token(), base: base, cancelBase: cancelBase, cancelLoop: cancelLoop, loopCtx: loopCtx, idle: make(chan struct{}), wake: make(chan struct{}, 1)}
	t.margin, t.hasMargin = startMargin(base)
	t.refused.span = refusalSpan(base)
	t.acct = newAccountant(t)
	if l := h.cfg.Ledger; l != nil {
		t.claims = newBatchQueue(l.MaxBatch(), claimsInflight, func(cs []ledger.Claim) []error {
			ctx, cancel := context.WithTimeout(base, ledgerTimeout)
			defer cancel()
			return l.Claim(ctx, cs)
		})
		t.claims.stuck = func(waited time.Duration, expected int) {
			h.log.Debug("claim batch sent before every run expected at its instant had claimed", "token", t.token, "waited", waited, "expected", expected)
		}
	}
	return t, loopCtx
}

// open makes t the term of its Host and of every job. A job's active count
// is not reset: runs abandoned by an earlier term still count (admit.go).
func (t *termRun) open() {
	h := t.h
	h.mu.Lock()
	h.term = t
	jobs := h.jobs // SetJobs attaches the jobs it adds from now on
	h.mu.Unlock()
	for _, j := range jobs {
		j.mu.Lock()
		if !j.retired.Load() {
			j.queue, j.next, j.scheduled, j.term, j.lastTurn = nil, time.Time{}, nil, t, nil
		}
		j.mu.Unlock()
	}
}

// close ends t's contexts and detaches it from its Host, which keeps it
// among the ended terms while calls of it are still going (Abandoned).
// Lead calls it last.
func (t *termRun) close() {
	h := t.h
	t.cancelLoop(nil)
	t.cancelBase(errors.New("schedulerhost: term over"))
	h.mu.Lock()
	h.term = nil // SetJobs no longer attaches jobs to t
	jobs := h.jobs
	h.mu.Unlock()
	for _, j := range jobs {
		j.mu.Lock()
		if j.term == t {
			j.next, j.scheduled, j.term = time.Time{}, nil, nil
		}
		j.mu.Unlock()
	}
	h.mu.Lock()
	if t.calls.Load() > 0 {
		h.ended = append(h.ended, t)
	}
	h.leading = false
	h.mu.Unlock()
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

// check returns nil if the term still holds and its runs were not
// cancelled: call it right before starting anything only the leader may
// start.
func (t *termRun) check() error {
	select {
	case <-t.base.Done():
		return context.Cause(t.base)
	default:
	}
	return t.term.Check()
}

// lose ends the term from inside: a ledger said it is stale. The runs and
// the loop end with err; then the Term ends its lease (Term.Lose), so the
// Elector learns of the loss by the same route as any other.
func (t *termRun) lose(err error) {
	t.cancelBase(err)
	t.cancelLoop(err)
	t.term.Lose(err)
}
