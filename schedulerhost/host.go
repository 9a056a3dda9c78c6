package schedulerhost

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/batonhq/baton/election"
)

// Host runs a set of cron jobs for one term of leadership at a time. Its
// Lead method has the signature election.Elector.Run expects:
//
//	elector.Run(ctx, host.Lead)
//
// Create it with New.
type Host struct {
	cfg  Config
	log  *slog.Logger
	jobs []*jobState

	running atomic.Int64 // runs whose function has not returned, across terms

	mu        sync.Mutex
	leading   bool
	term      *termRun // nil between terms
	abandoned int      // runs of ended terms still going
}

type jobState struct {
	Job
	sched cron.Schedule

	// guarded by Host.mu
	active  int         // runs of this job in flight in the current term
	queue   []time.Time // ticks waiting (OverlapQueue)
	next    time.Time   // next tick while leading
	recent  []Run       // newest last, at most recentRuns
	skipped int64
}

const (
	recentRuns    = 10
	maxQueue      = 100
	ledgerTimeout = 5 * time.Second
	maxMissedScan = 100000
)

// New copies cfg, applies defaults, parses every schedule and validates.
// A bad spec, a duplicate name or a missing function is an error naming
// the job and the value; nothing is checked later, at election time.
func New(cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	h := &Host{cfg: cfg, log: cfg.Logger}
	for _, j := range cfg.Jobs {
		s, err := ParseSchedule(j.Schedule)
		if err != nil { // Validate parsed it already
			return nil, err
		}
		h.jobs = append(h.jobs, &jobState{Job: j, sched: s})
	}
	return h, nil
}

// Tick identifies one scheduled run: the job and the nominal time the
// schedule gave, not the time the run started.
type Tick struct {
	Job     string
	Time    time.Time
	CatchUp bool // the run stands for ticks missed while nobody led
}

type tickKey struct{}

// ContextWithTick returns a context carrying tick, for testing job code
// outside a Host.
func ContextWithTick(ctx context.Context, tick Tick) context.Context {
	return context.WithValue(ctx, tickKey{}, tick)
}

// TickFromContext returns the tick a job's run context belongs to.
func TickFromContext(ctx context.Context) (Tick, bool) {
	t, ok := ctx.Value(tickKey{}).(Tick)
	return t, ok
}

// Running reports how many runs have started and not returned, including
// runs abandoned after a drain timed out. An instance with runs still
// going after it lost leadership should report itself unhealthy.
func (h *Host) Running() int { return int(h.running.Load()) }

// Abandoned reports how many runs are still going although the term that
// started them is over (Lead returned): they ignored their cancellation
// and may overlap with the next leader's runs. An instance should report
// itself unhealthy while it is above zero, even if it leads again.
func (h *Host) Abandoned() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.abandoned
}

// termRun is the state of one call of Lead.
type termRun struct {
	h          *Host
	token      uint64
	base       context.Context // parent of every run's context; ends on loss
	cancelBase context.CancelCauseFunc
	cancelLoop context.CancelCauseFunc

	// guarded by h.mu
	stopping bool
	inflight int
	idle     chan struct{} // closed when stopping and inflight == 0
	calls    int           // job functions called and not returned
	over     bool          // Lead returned
}

// Lead runs the jobs until ctx ends, then stops starting runs and waits for
// the runs in flight, and returns. Call it with a term context from
// election.Elector.Run (or one made with election.ContextWithToken). It
// blocks; it must not be called concurrently with itself.
//
// How it stops depends on context.Cause(ctx):
//   - wrapping election.ErrLeadershipLost: runs are cancelled at once (their
//     contexts end with that cause); Lead waits up to ShutdownTimeout for
//     them to return;
//   - anything else (a graceful stop, election.ErrSteppingDown): runs keep
//     going for up to ShutdownTimeout, then are cancelled with
//     ErrShutdownTimeout, then Lead waits up to KillGrace more.
//
// If the ledger says the term is stale, Lead stops as on a loss and returns
// an error wrapping election.ErrLeadershipLost. It returns an error too if
// runs were still going when it gave up waiting.
func (h *Host) Lead(ctx context.Context) error {
	h.mu.Lock()
	if h.leading {
		h.mu.Unlock()
		return errors.New("schedulerhost: Lead called while already leading")
	}
	h.leading = true
	h.mu.Unlock()

	termStart := time.Now()
	token, _ := election.TokenFromContext(ctx)
	base, cancelBase := context.WithCancelCause(election.LeaseContext(ctx))
	loopCtx, cancelLoop := context.WithCancelCause(ctx)
	t := &termRun{h: h, token: token, base: base, cancelBase: cancelBase, cancelLoop: cancelLoop, idle: make(chan struct{})}

	h.mu.Lock()
	h.term = t
	for _, j := range h.jobs {
		j.active, j.queue, j.next = 0, nil, time.Time{}
	}
	h.mu.Unlock()
	defer func() {
		cancelLoop(nil)
		cancelBase(errors.New("schedulerhost: term over"))
		h.mu.Lock()
		t.over = true
		h.abandoned += t.calls
		h.term = nil
		h.leading = false
		for _, j := range h.jobs {
			j.next = time.Time{}
		}
		h.mu.Unlock()
	}()

	h.log.Info("leading: running schedules", "token", token, "jobs", len(h.jobs))
	if h.cfg.Ledger != nil {
		t.catchUp(loopCtx, termStart)
	}
	t.loop(loopCtx, termStart)
	return t.drain(context.Cause(loopCtx))
}

// lose ends the term from inside: a ledger said it is stale.
func (t *termRun) lose(err error) {
	t.cancelBase(err)
	t.cancelLoop(err)
}

// schedEntry is one job in the timer heap.
type schedEntry struct {
	job  *jobState
	next time.Time
}

type schedHeap []*schedEntry

func (s schedHeap) Len() int           { return len(s) }
func (s schedHeap) Less(i, j int) bool { return s[i].next.Before(s[j].next) }
func (s schedHeap) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s *schedHeap) Push(x any)        { *s = append(*s, x.(*schedEntry)) }
func (s *schedHeap) Pop() any {
	old := *s
	e := old[len(old)-1]
	*s = old[:len(old)-1]
	return e
}

// loop fires ticks from the first one after from until ctx ends. One
// timer, one heap: each wake pops only the due entries.
func (t *termRun) loop(ctx context.Context, from time.Time) {
	h := t.h
	loc := h.cfg.Location
	hp := make(schedHeap, 0, len(h.jobs))
	h.mu.Lock()
	for _, j := range h.jobs {
		n := j.sched.Next(from.In(loc))
		if n.IsZero() {
			continue
		}
		j.next = n
		hp = append(hp, &schedEntry{job: j, next: n})
	}
	h.mu.Unlock()
	heap.Init(&hp)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if len(hp) == 0 {
			<-ctx.Done()
			return
		}
		timer.Reset(time.Until(hp[0].next))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		for len(hp) > 0 && !hp[0].next.After(now) {
			e := hp[0]
			tick := e.next
			e.next = e.job.sched.Next(tick)
			h.mu.Lock()
			e.job.next = e.next
			h.mu.Unlock()
			if e.next.IsZero() {
				heap.Pop(&hp)
			} else {
				heap.Fix(&hp, 0)
			}
			t.fire(e.job, tick, false, false)
		}
	}
}

// fire starts a run of j for tick unless the overlap policy or a stop says
// otherwise. claimed means the ledger claim was made already.
func (t *termRun) fire(j *jobState, tick time.Time, catchUp, claimed bool) {
	h := t.h
	h.mu.Lock()
	if t.stopping {
		h.mu.Unlock()
		return
	}
	if j.active > 0 {
		switch j.Overlap {
		case OverlapSkip:
			j.skipped++
			h.mu.Unlock()
			h.log.Warn("tick skipped: previous run still going", "job", j.Name, "tick", tick, "overlap", j.Overlap)
			if h.cfg.Observer != nil {
				h.cfg.Observer.OverlapSkipped(j.Name)
			}
			return
		case OverlapQueue:
			if len(j.queue) >= maxQueue {
				j.skipped++
				h.mu.Unlock()
				h.log.Warn("tick skipped: queue full", "job", j.Name, "tick", tick, "queued", maxQueue)
				if h.cfg.Observer != nil {
					h.cfg.Observer.OverlapSkipped(j.Name)
				}
				return
			}
			j.queue = append(j.queue, tick)
			h.mu.Unlock()
			return
		}
	}
	j.active++
	t.inflight++
	h.mu.Unlock()
	go t.run(j, []time.Time{tick}, catchUp, claimed)
}

// run runs ticks of j one after another (more than one for a run-all
// catch-up), then whatever the queue holds, then returns.
func (t *termRun) run(j *jobState, ticks []time.Time, catchUp, claimed bool) {
	h := t.h
	for {
		for i, tick := range ticks {
			if !t.runOne(j, tick, catchUp, claimed) && claimed {
				// The term ended: record the claimed ticks left as not run.
				for _, rest := range ticks[i+1:] {
					t.finishNotStarted(j, rest, catchUp)
				}
				break
			}
		}
		h.mu.Lock()
		if j.Overlap == OverlapQueue && len(j.queue) > 0 && !t.stopping && t.base.Err() == nil {
			ticks, catchUp, claimed = j.queue[:1], false, false
			j.queue = j.queue[1:]
			h.mu.Unlock()
			continue
		}
		j.active--
		t.inflight--
		if t.stopping && t.inflight == 0 {
			close(t.idle)
		}
		h.mu.Unlock()
		return
	}
}

// runOne claims (unless claimed) and runs one tick. It reports whether the
// term is still live afterwards.
func (t *termRun) runOne(j *jobState, tick time.Time, catchUp, claimed bool) bool {
	h := t.h
	log := h.log.With("job", j.Name, "tick", tick, "token", t.token)
	if err := election.CheckTerm(t.base); err != nil {
		if claimed {
			t.finishNotStarted(j, tick, catchUp)
		}
		log.Warn("run not started: term over", "err", err)
		return false
	}
	if !claimed && h.cfg.Ledger != nil {
		if err := t.claim(j, tick, catchUp); err != nil {
			return !errors.Is(err, election.ErrLeadershipLost)
		}
		// The claim took I/O: check the term again right before the start.
		if err := election.CheckTerm(t.base); err != nil {
			t.finishNotStarted(j, tick, catchUp)
			log.Warn("run not started: term over", "err", err)
			return false
		}
	}

	ctx, cancel := context.WithCancelCause(context.WithValue(t.base, tickKey{}, Tick{Job: j.Name, Time: tick, CatchUp: catchUp}))
	defer cancel(nil)
	if j.Timeout > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeoutCause(ctx, j.Timeout, ErrJobTimeout)
		defer c2()
	}
	started := time.Now()
	lateness := started.Sub(tick)
	if h.cfg.Observer != nil {
		h.cfg.Observer.RunStarted(j.Name, tick, lateness)
	}
	log.Info("run started", "catch_up", catchUp, "late", lateness.Round(time.Microsecond))
	h.running.Add(1)
	h.mu.Lock()
	t.calls++
	h.mu.Unlock()
	err := call(ctx, j.Run)
	h.running.Add(-1)
	h.mu.Lock()
	t.calls--
	if t.over {
		h.abandoned--
	}
	h.mu.Unlock()
	took := time.Since(started)

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
	r := Run{Job: j.Name, Tick: tick, Instance: h.cfg.Instance, Token: t.token, CatchUp: catchUp, Started: started, Ended: time.Now(), Result: res}
	if err != nil {
		r.Error = err.Error()
		log.Error("run ended", "result", res, "took", took.Round(time.Microsecond), "err", err)
	} else {
		log.Info("run ended", "result", res, "took", took.Round(time.Microsecond))
	}
	t.record(r)
	return t.base.Err() == nil
}

// claim claims tick in the ledger; on a stale term it ends the term.
func (t *termRun) claim(j *jobState, tick time.Time, catchUp bool) error {
	h := t.h
	ctx, cancel := context.WithTimeout(t.base, ledgerTimeout)
	defer cancel()
	err := h.cfg.Ledger.Claim(ctx, Claim{Job: j.Name, Tick: tick, Token: t.token, Instance: h.cfg.Instance, CatchUp: catchUp, Started: time.Now()})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, election.ErrLeadershipLost):
		h.log.Error("claim refused: term is stale; stopping", "job", j.Name, "tick", tick, "token", t.token, "err", err)
		t.lose(err)
	case errors.Is(err, ErrTickClaimed):
		h.log.Warn("run not started: tick already claimed", "job", j.Name, "tick", tick, "token", t.token)
	default:
		h.log.Error("run not started: claim failed", "job", j.Name, "tick", tick, "token", t.token, "err", err)
		if h.cfg.Observer != nil {
			h.cfg.Observer.Misfired(j.Name, 1)
		}
	}
	return err
}

func (t *termRun) finishNotStarted(j *jobState, tick time.Time, catchUp bool) {
	now := time.Now()
	t.record(Run{Job: j.Name, Tick: tick, Instance: t.h.cfg.Instance, Token: t.token, CatchUp: catchUp,
		Started: now, Ended: now, Result: ResultCancelled, Error: "claimed but not started: term ended"})
}

// record keeps r in the local history and stores it in the ledger.
func (t *termRun) record(r Run) {
	h := t.h
	h.mu.Lock()
	for _, j := range h.jobs {
		if j.Name == r.Job {
			j.recent = append(j.recent, r)
			if len(j.recent) > recentRuns {
				j.recent = j.recent[1:]
			}
		}
	}
	h.mu.Unlock()
	if h.cfg.Ledger == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.base), ledgerTimeout)
	defer cancel()
	if err := h.cfg.Ledger.Finish(ctx, r); err != nil {
		h.log.Warn("recording run failed", "job", r.Job, "tick", r.Tick, "err", err)
	}
}

func call(ctx context.Context, f func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return f(ctx)
}

// drain stops new starts and waits for the runs in flight as Lead's doc
// says.
func (t *termRun) drain(cause error) error {
	h := t.h
	start := time.Now()
	h.mu.Lock()
	t.stopping = true
	for _, j := range h.jobs {
		j.queue = nil
	}
	n := t.inflight
	if n == 0 {
		close(t.idle)
	}
	h.mu.Unlock()

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
			h.mu.Lock()
			n = t.inflight
			h.mu.Unlock()
			h.log.Error("drain timed out: cancelling runs", "token", t.token, "runs", n, "timeout", h.cfg.ShutdownTimeout)
			t.cancelBase(ErrShutdownTimeout)
			wait(h.cfg.KillGrace)
		}
	}
	h.mu.Lock()
	left := t.inflight
	h.mu.Unlock()
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
