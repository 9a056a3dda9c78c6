package schedulerhost

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/ledger"
)

// Tick identifies one scheduled run: the job and the nominal time the
// schedule gave, not the time the run started.
type Tick struct {
	Job     string
	Time    time.Time
	CatchUp bool // the run stands for ticks missed while nobody led, or skipped over by a wall-clock step
	// CatchUpFrom is, for a catch-up run, the earliest missed tick it
	// stands for: with MisfireRunOnce the first missed tick within the
	// misfire grace (Time is the last), with MisfireRunAll the run's own
	// Time. The missed ticks from CatchUpFrom through Time are the ones
	// the run covers. Zero for other runs.
	CatchUpFrom time.Time
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

// tickRun is one tick of one job going through the pipeline
// (pipeline.go). It is also the run's context: the term's base context
// plus the tick, so that a run costs one allocation. The job function gets
// it, or a child of it (timeoutStep). The run ends with the base context
// (loss, shutdown timeout): only a Timeout gives it a context of its own.
type tickRun struct {
	context.Context // the term's base context
	tick            Tick

	t        *termRun
	job      *jobState
	claimed  bool         // the ledger holds the tick's claim (a claimed catch-up batch, or claimStep)
	tn       turn         // the run's claim turn, passed on by gateStep or claimStep
	expected bool         // counted by the term's claim queue (batch.go) until it claims or arrives
	attempt  atomic.Int32 // the attempt going or last made, from 1 (retryStep); read by AttemptFromContext
	manual   *Manual      // set for a run-now run (control.go); read by ManualFromContext

	// Filled in by the steps.
	ctx         context.Context // what the job function gets: the run itself, or timeoutStep's child
	delay       time.Duration   // gateStep: the tick's jitter delay (JitterDelay), zero without Jitter
	pauseMark   uint64          // gateStep: the pause reads started before its waits ended (pauseStep reads a later one)
	over        bool            // gateStep or claimStep found the term over
	unknown     *ledger.Run     // claimStep: the claim failed, outcome unknown; the entry to write
	started     time.Time       // observeStep
	startedMono time.Duration   // observeStep
	ended       time.Time       // countStep
	took        time.Duration   // countStep
	err         error           // callJob, recoverStep; countStep adds the cause
	result      ledger.Result   // countStep
	ran         bool            // countStep: the job function was called and returned; notRun: stopped, with an entry to write
	finish      func()          // set for a run that writes its record its own way (a run-now run): write calls it
	traceID     string          // traceStep: the run's sampled trace (TraceIDFromContext)
}

func (t *termRun) newRun(j *jobState, tick time.Time, catchUp, claimed bool, tn turn) *tickRun {
	r := &tickRun{Context: t.base, tick: Tick{Job: j.Name, Time: tick, CatchUp: catchUp}, t: t, job: j, claimed: claimed, tn: tn}
	if catchUp {
		r.tick.CatchUpFrom = tick
		if from, ok := t.covers.Load(coverKey{j.Name, tick.UnixNano()}); ok {
			r.tick.CatchUpFrom = from.(time.Time)
		}
	}
	r.ctx = r
	r.attempt.Store(1)
	return r
}

func (r *tickRun) Value(key any) any {
	switch key {
	case tickKey{}:
		return &r.tick
	case attemptKey{}:
		return int(r.attempt.Load())
	case traceIDKey{}:
		return r.traceID
	case manualKey{}:
		if r.manual != nil {
			return r.manual
		}
		return nil
	}
	return r.Context.Value(key)
}

// arrive tells the term's claim queue that r, if still counted there,
// will not claim now (batch.go).
func (r *tickRun) arrive() {
	if r.expected {
		r.expected = false
		r.t.claims.arrive()
	}
}

// passTurn lets the job's next claim go (claim.go); later calls do nothing.
func (r *tickRun) passTurn() {
	r.tn.done()
	r.tn = turn{}
}

// runTick runs one scheduled tick of j, claimed in turn tn, then whatever
// j's queue holds for it. fireAll starts it on a goroutine of its own,
// counted by the term's claim queue (expected).
func (t *termRun) runTick(j *jobState, tick time.Time, tn turn, mark uint64) {
	one := [1]time.Time{tick}
	t.runTicks(j, one[:], false, false, tn, t.claims != nil, mark)
}

// runTicks runs ticks of j one after another on this goroutine, each
// through j's pipeline (more than one for a run-all catch-up; claimed says
// the ledger holds their claims already), then the ticks j's queue holds
// for this run (admit.go), then stops counting as active and returns. Only
// the first tick has a claim turn (tn).
//
// A run's history entry is written when the next run of the sequence is
// about to start or, for the last run, after the job has stopped counting
// it as active (nextQueued): runs stop counting as active before their
// ledger write, so that a slow write does not make the job's next tick look
// like an overlap. A claimed tick not started because the term ended is
// written the same way, and so are the ticks left of a claimed batch that
// the term's end cut short: recorded as claimed but not started. expected says the first run is
// counted by the term's claim queue: it claims or arrives. mark is the
// number of reads of the pauses started when the first tick was due to
// start (markPauses): its pause check uses a later read; the ticks after
// it, which start later, take their own.
func (t *termRun) runTicks(j *jobState, ticks []time.Time, catchUp, claimed bool, tn turn, expected bool, mark uint64) {
	t.runSequence(nil, j, ticks, catchUp, claimed, tn, expected, mark)
}

// afterRun lets the ticks j's queue holds go once r, a run of j that
// ended outside runTicks (a run-now run, or one that did not start), no
// longer counts as active, and writes r's record (r.finish) before them,
// as runTicks writes a run's entry.
func (t *termRun) afterRun(r *tickRun) {
	t.runSequence(r, r.job, nil, false, false, turn{}, false, 0)
}

// runSequence is runTicks with held, a run ended before it whose record
// is not written yet, or nil.
func (t *termRun) runSequence(held *tickRun, j *jobState, ticks []time.Time, catchUp, claimed bool, tn turn, expected bool, mark uint64) {
	// The claimed ticks of a batch cut short, to be recorded as not
	// started once j stops counting the run.
	var notStarted []time.Time
	var notStartedJob *jobState
	var notStartedCatchUp bool
	var one [1]time.Time
	marked := false // mark was used
	for {
		for i, tick := range ticks {
			t.write(held)
			held = nil
			r := t.newRun(j, tick, catchUp, claimed, tn)
			r.expected, tn, expected = expected, turn{}, false
			if i > 0 || marked {
				mark = t.markPauses() // a run started after the one before
			}
			r.pauseMark, marked = mark, true
			j.pipeline(r)
			r.arrive()
			if r.ran || r.unknown != nil {
				held = r
			}
			if claimed && (r.over || !t.live()) { // the term ended: the claimed ticks left did not run
				err := t.check()
				for _, rest := range ticks[i+1:] { // said now, written once j stops counting the run
					t.h.log.Warn("run not started: term over", "job", j.Name, "tick", rest, "token", t.token, "err", err)
				}
				notStarted, notStartedJob, notStartedCatchUp = ticks[i+1:], j, catchUp
				break
			}
		}
		j.mu.Lock()
		q, take, to := t.nextQueued(j)
		j.mu.Unlock()
		if take {
			one[0], j = q.tick, q.job
			ticks, catchUp, claimed = one[:], q.catchUp, false
			continue
		}
		if to != nil { // a later term's queue waited for this run
			go to.runTicks(q.job, []time.Time{q.tick}, q.catchUp, false, turn{}, false, to.markPauses())
		}
		t.write(held)
		for _, tick := range notStarted {
			t.finishNotStarted(notStartedJob, tick, notStartedCatchUp)
		}
		t.end()
		return
	}
}
