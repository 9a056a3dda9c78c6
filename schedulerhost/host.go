package schedulerhost

import (
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
	cfg   Config
	log   *slog.Logger
	jobs  []*jobState
	clock clock

	running atomic.Int64 // runs whose function has not returned, across terms

	mu      sync.Mutex
	leading bool
	term    *termRun   // nil between terms
	ended   []*termRun // ended terms that had runs still going
}

type jobState struct {
	Job
	sched cron.Schedule

	mu       sync.Mutex    // guards the fields below
	active   int           // runs of this job going in this process, any term (admit.go)
	queue    []queued      // ticks waiting (OverlapQueue), of the term leading now
	term     *termRun      // the term leading now, nil between terms
	lastTurn chan struct{} // the latest claim turn taken (claim.go)
	next     time.Time     // next tick while leading
	recent   []pastRun     // at most recentRuns, a ring once full
	oldest   int           // index of the oldest entry of a full ring
	skipped  int64
}

// pastRun is a Run kept in memory for status pages: compact and nearly
// free of pointers, because a Host may keep thousands of jobs' runs and
// the garbage collector scans them all.
type pastRun struct {
	tick, started, ended int64 // unix nanoseconds
	token                uint64
	result               uint8
	catchUp              bool
	err                  string
}

var resultCodes = []Result{ResultRunning, ResultOK, ResultFailed, ResultTimeout, ResultCancelled}

func resultCode(r Result) uint8 {
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

func (j *jobState) keep(r Run) {
	p := pastRun{tick: nanos(r.Tick), started: nanos(r.Started), ended: nanos(r.Ended), token: r.Token,
		result: resultCode(r.Result), catchUp: r.CatchUp, err: r.Error}
	if len(j.recent) < recentRuns {
		j.recent = append(j.recent, p)
	} else {
		j.recent[j.oldest] = p
		j.oldest = (j.oldest + 1) % recentRuns
	}
}

// recentNewestFirst returns up to n recent runs, newest first. j.mu is
// held.
func (j *jobState) recentNewestFirst(n int, instance string) []Run {
	out := make([]Run, 0, min(n, len(j.recent)))
	for i := range len(j.recent) {
		if len(out) == n {
			break
		}
		p := j.recent[(j.oldest+len(j.recent)-1-i)%len(j.recent)]
		out = append(out, Run{Job: j.Name, Tick: fromNanos(p.tick), Instance: instance, Token: p.token, CatchUp: p.catchUp,
			Started: fromNanos(p.started), Ended: fromNanos(p.ended), Result: resultCodes[p.result], Error: p.err})
	}
	return out
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
	h := &Host{cfg: cfg, log: cfg.Logger, clock: newRealClock()}
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
	CatchUp bool // the run stands for ticks missed while nobody led, or skipped over by a wall-clock step
}

type tickKey struct{}

// ContextWithTick returns a context carrying tick, for testing job code
// outside a Host.
func ContextWithTick(ctx context.Context, tick Tick) context.Context {
	return context.WithValue(ctx, tickKey{}, tick)
}

// TickFromContext returns the tick a job's run context belongs to.
func TickFromContext(ctx context.Context) (Tick, bool) {
	switch t := ctx.Value(tickKey{}).(type) {
	case Tick:
		return t, true
	case *Tick:
		return *t, true
	}
	return Tick{}, false
}

// runCtx is a run's context: the term's base context plus the tick, in
// one allocation.
type runCtx struct {
	context.Context
	tick Tick
}

func (c *runCtx) Value(key any) any {
	if key == (tickKey{}) {
		return &c.tick
	}
	return c.Context.Value(key)
}

// Running reports how many runs have started and not returned, including
// runs abandoned after a drain timed out. An instance with runs still
// going after it lost leadership should report itself unhealthy.
func (h *Host) Running() int { return int(h.running.Load()) }

// Abandoned reports how many runs are still going although the term that
// started them is over (Lead returned): they ignored their cancellation
// and may overlap with the next leader's runs. An instance should report
// itself unhealthy while it is above zero, even if it leads again. If this
// Host leads again, such a run still counts for its job's overlap policy:
// the new term skips (OverlapSkip) or queues (OverlapQueue) the job's
// ticks until it returns, or runs them beside it (OverlapAllow); when it
// returns it releases only its own count.
func (h *Host) Abandoned() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	keep := h.ended[:0]
	for _, t := range h.ended {
		if c := int(t.calls.Load()); c > 0 {
			n += c
			keep = append(keep, t)
		}
	}
	clear(h.ended[len(keep):])
	h.ended = keep
	return n
}

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

	sc := newSchedClock(h.clock)
	termStart := sc.at
	token, _ := election.TokenFromContext(ctx)
	base, cancelBase := context.WithCancelCause(election.LeaseContext(ctx))
	loopCtx, cancelLoop := context.WithCancelCause(ctx)
	t := &termRun{h: h, token: token, base: base, cancelBase: cancelBase, cancelLoop: cancelLoop, idle: make(chan struct{})}

	h.mu.Lock()
	h.term = t
	h.mu.Unlock()
	for _, j := range h.jobs {
		j.mu.Lock() // active is not reset: runs abandoned by an earlier term still count
		j.queue, j.next, j.term, j.lastTurn = nil, time.Time{}, t, nil
		j.mu.Unlock()
	}
	defer func() {
		cancelLoop(nil)
		cancelBase(errors.New("schedulerhost: term over"))
		for _, j := range h.jobs {
			j.mu.Lock()
			j.next, j.term = time.Time{}, nil
			j.mu.Unlock()
		}
		h.mu.Lock()
		if t.calls.Load() > 0 {
			h.ended = append(h.ended, t)
		}
		h.term = nil
		h.leading = false
		h.mu.Unlock()
	}()

	h.log.Info("leading: running schedules", "token", token, "jobs", len(h.jobs))
	if h.cfg.Ledger != nil {
		t.catchUp(loopCtx, termStart)
	}
	t.loop(loopCtx, sc)
	return t.drain(context.Cause(loopCtx))
}

// lose ends the term from inside: a ledger said it is stale.
func (t *termRun) lose(err error) {
	t.cancelBase(err)
	t.cancelLoop(err)
}

// bucket holds the jobs whose next tick is the same instant: jobs that
// share a schedule wake together, and a wake costs one heap operation and
// a pass over its bucket, not one heap operation per job.
type bucket struct {
	at   time.Time
	due  []dueTick
	slot int // index in the heap
}

type dueTick struct {
	job  *jobState
	tick time.Time
}

// starting is a due tick admitted to start, with its claim turn.
type starting struct {
	dueTick
	tn turn
}

// timeline is a min-heap of buckets by instant, with an index by instant.
type timeline struct {
	heap   []*bucket
	byTime map[int64]*bucket
	spare  [][]dueTick // emptied bucket slices, reused
}

func (tl *timeline) less(i, j int) bool { return tl.heap[i].at.Before(tl.heap[j].at) }
func (tl *timeline) swap(i, j int) {
	tl.heap[i], tl.heap[j] = tl.heap[j], tl.heap[i]
	tl.heap[i].slot, tl.heap[j].slot = i, j
}

func (tl *timeline) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !tl.less(i, p) {
			return
		}
		tl.swap(i, p)
		i = p
	}
}

func (tl *timeline) down(i int) {
	n := len(tl.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && tl.less(r, l) {
			m = r
		}
		if !tl.less(m, i) {
			return
		}
		tl.swap(i, m)
		i = m
	}
}

// add schedules j at tick.
func (tl *timeline) add(j *jobState, tick time.Time) {
	k := tick.UnixNano()
	b := tl.byTime[k]
	if b == nil {
		b = &bucket{at: tick, slot: len(tl.heap)}
		if n := len(tl.spare); n > 0 {
			b.due, tl.spare = tl.spare[n-1][:0], tl.spare[:n-1]
		}
		tl.byTime[k] = b
		tl.heap = append(tl.heap, b)
		tl.up(b.slot)
	}
	b.due = append(b.due, dueTick{j, tick})
}

// popDue removes and returns the earliest bucket if it is due at now.
func (tl *timeline) popDue(now time.Time) *bucket {
	if len(tl.heap) == 0 || tl.heap[0].at.After(now) {
		return nil
	}
	b := tl.heap[0]
	last := len(tl.heap) - 1
	tl.swap(0, last)
	tl.heap = tl.heap[:last]
	if last > 0 {
		tl.down(0)
	}
	delete(tl.byTime, b.at.UnixNano())
	return b
}

// loop fires ticks from the first one after the term's start until ctx
// ends. One timer over a heap of instants, on schedule time (clock.go); at
// each wake the due runs start first, then the next ticks are computed
// (once per distinct schedule and tick). Ticks a forward step of the wall
// clock skipped over go to skipOver instead.
func (t *termRun) loop(ctx context.Context, sc *schedClock) {
	h := t.h
	tl := &timeline{byTime: map[int64]*bucket{}}
	for _, j := range h.jobs {
		t.setNext(tl, j, j.sched.Next(sc.at.In(h.cfg.Location)))
	}
	timer := h.clock.newTimer(time.Hour)
	defer timer.Stop()
	type memo struct{ tick, next time.Time }
	nextOf := map[string]memo{} // by schedule spec: jobs sharing a spec share Next
	var due, skipped []dueTick
	var gapFrom, gapTo time.Time // ticks in (gapFrom, gapTo] were skipped over by a step
	for ctx.Err() == nil {
		now, expected, step := sc.read()
		if step > 0 {
			gapFrom, gapTo = expected, now
			h.log.Warn("wall clock stepped forward: the ticks it skipped over count as missed", "token", t.token, "step", step, "from", expected, "to", now)
		} else if step < 0 {
			h.log.Warn("wall clock stepped back: ticks go on with the monotonic clock", "token", t.token, "step", step, "ahead_of_wall_clock", sc.ahead)
		}
		due, skipped = due[:0], skipped[:0]
		for b := tl.popDue(now); b != nil; b = tl.popDue(now) {
			for _, d := range b.due {
				if inGap(d.tick, gapFrom, gapTo) {
					skipped = append(skipped, d)
				} else {
					due = append(due, d)
				}
			}
			tl.spare = append(tl.spare, b.due)
		}
		if len(due)+len(skipped) == 0 {
			if len(tl.heap) == 0 {
				<-ctx.Done()
				return
			}
			timer.Reset(min(tl.heap[0].at.Sub(now), maxSleep))
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			continue
		}
		t.fireAll(due)
		clear(nextOf)
		for _, d := range due {
			m, ok := nextOf[d.job.Schedule]
			if !ok || !m.tick.Equal(d.tick) {
				m = memo{d.tick, d.job.sched.Next(d.tick)}
				nextOf[d.job.Schedule] = m
			}
			next := m.next
			if inGap(next, gapFrom, gapTo) {
				next = t.skipOver(d.job, next, gapTo)
			}
			t.setNext(tl, d.job, next)
		}
		for _, d := range skipped {
			t.setNext(tl, d.job, t.skipOver(d.job, d.tick, gapTo))
		}
	}
}

func inGap(tick, from, to time.Time) bool {
	return !to.IsZero() && tick.After(from) && !tick.After(to)
}

// setNext makes next the next tick of j (none if zero).
func (t *termRun) setNext(tl *timeline, j *jobState, next time.Time) {
	j.mu.Lock()
	j.next = next
	j.mu.Unlock()
	if !next.IsZero() {
		tl.add(j, next)
	}
}

// fireAll fires a batch of due ticks: each starts a run unless a stop or
// the overlap policy says otherwise. The runs start before anything else
// is done with the batch.
func (t *termRun) fireAll(due []dueTick) {
	var skipped []dueTick
	start := t.startBuf[:0]
	for _, d := range due {
		if !t.begin() {
			break
		}
		ok, skip, tn := t.admit(d.job, d.tick)
		if ok {
			start = append(start, starting{d, tn})
			continue
		}
		t.end()
		if skip {
			skipped = append(skipped, d)
		}
	}
	for _, d := range start {
		go t.runTick(d.job, d.tick, d.tn)
	}
	t.startBuf = start
	for _, d := range skipped {
		t.skippedTick(d.job, d.tick)
	}
}

// runTick runs one tick of j, claimed in turn tn (then whatever the queue
// holds).
func (t *termRun) runTick(j *jobState, tick time.Time, tn turn) {
	var done []Run
	t.runOne(j, tick, false, false, tn, &done)
	t.run(j, nil, false, false, done)
}

// run runs ticks of j one after another (more than one for a run-all
// catch-up), then whatever the queue holds, then returns. done holds runs
// finished and not yet recorded: the last run is recorded (a ledger write)
// after the job stops counting as active, so that write does not make the
// next tick look like an overlap.
func (t *termRun) run(j *jobState, ticks []time.Time, catchUp, claimed bool, done []Run) {
	var one [1]time.Time
	for {
		for i, tick := range ticks {
			for _, r := range done {
				t.record(j, r)
			}
			done = done[:0]
			if !t.runOne(j, tick, catchUp, claimed, turn{}, &done) && claimed {
				// The term ended: record the claimed ticks left as not run.
				for _, rest := range ticks[i+1:] {
					t.finishNotStarted(j, rest, catchUp)
				}
				break
			}
		}
		j.mu.Lock()
		q, take, to := t.nextQueued(j)
		j.mu.Unlock()
		if take {
			one[0] = q.tick
			ticks, catchUp, claimed = one[:], q.catchUp, false
			continue
		}
		if to != nil { // a later term's queue waited for this run
			go to.run(j, []time.Time{q.tick}, q.catchUp, false, nil)
		}
		for _, r := range done {
			t.record(j, r)
		}
		t.end()
		return
	}
}

// runOne claims (unless claimed) in turn tn and runs one tick; a run it
// started is appended to done for the caller to record. It reports whether
// the term is still live afterwards.
func (t *termRun) runOne(j *jobState, tick time.Time, catchUp, claimed bool, tn turn, done *[]Run) bool {
	h := t.h
	tn.wait(t)
	if !claimed && t.stopping.Load() {
		tn.done()
		return true // not started: the term is stopping
	}
	if err := election.CheckTerm(t.base); err != nil {
		tn.done()
		if claimed {
			t.finishNotStarted(j, tick, catchUp)
		}
		h.log.Warn("run not started: term over", "job", j.Name, "tick", tick, "token", t.token, "err", err)
		return false
	}
	if !claimed && h.cfg.Ledger != nil {
		err := t.claim(j, tick, catchUp)
		tn.done()
		if err != nil {
			return !errors.Is(err, election.ErrLeadershipLost)
		}
		// The claim took I/O: check the term again right before the start.
		if err := election.CheckTerm(t.base); err != nil {
			t.finishNotStarted(j, tick, catchUp)
			h.log.Warn("run not started: term over", "job", j.Name, "tick", tick, "token", t.token, "err", err)
			return false
		}
	}

	// The run ends with the term's base context (loss, shutdown timeout);
	// only a Timeout needs a context of its own, registered with the base.
	var ctx context.Context = &runCtx{Context: t.base, tick: Tick{Job: j.Name, Time: tick, CatchUp: catchUp}}
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, j.Timeout, ErrJobTimeout)
		defer cancel()
	}
	started, startedMono := h.clock.now()
	lateness := started.Sub(tick)
	if h.cfg.Observer != nil {
		h.cfg.Observer.RunStarted(j.Name, tick, lateness)
	}
	logInfo := h.log.Enabled(context.Background(), slog.LevelInfo) // skip boxing the attributes when off
	if logInfo {
		h.log.Info("run started", "job", j.Name, "tick", tick, "token", t.token, "catch_up", catchUp, "late", lateness.Round(time.Microsecond))
	}
	h.running.Add(1)
	t.calls.Add(1)
	err := call(ctx, j.Run)
	t.calls.Add(-1)
	h.running.Add(-1)
	ended, endedMono := h.clock.now()
	took := endedMono - startedMono

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
	r := Run{Job: j.Name, Tick: tick, Instance: h.cfg.Instance, Token: t.token, CatchUp: catchUp, Started: started, Ended: ended, Result: res}
	if err != nil {
		r.Error = err.Error()
		h.log.Error("run ended", "job", j.Name, "tick", tick, "token", t.token, "result", res, "took", took.Round(time.Microsecond), "err", err)
	} else if logInfo {
		h.log.Info("run ended", "job", j.Name, "tick", tick, "token", t.token, "result", res, "took", took.Round(time.Microsecond))
	}
	*done = append(*done, r)
	return t.live()
}

func (t *termRun) finishNotStarted(j *jobState, tick time.Time, catchUp bool) {
	now := t.h.wallNow()
	t.record(j, Run{Job: j.Name, Tick: tick, Instance: t.h.cfg.Instance, Token: t.token, CatchUp: catchUp,
		Started: now, Ended: now, Result: ResultCancelled, Error: "claimed but not started: term ended"})
}

// record keeps r in j's local history and stores it in the ledger.
func (t *termRun) record(j *jobState, r Run) {
	h := t.h
	j.mu.Lock()
	j.keep(r)
	j.mu.Unlock()
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
	t.stopping.Store(true)
	for _, j := range h.jobs {
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
