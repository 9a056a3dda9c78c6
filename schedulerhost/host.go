package schedulerhost

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/robfig/cron/v3"
)

// Host runs a set of cron jobs for one term of leadership at a time. Its
// Lead method has the signature election.Elector.Run expects:
//
//	elector.Run(ctx, host.Lead)
//
// Create it with New.
type Host struct {
	cfg     Config
	log     *slog.Logger
	ctxObs  ContextObserver // cfg.Observer, if it is one
	clock   clock
	started time.Time // wall clock at New: Absence counts the ticks after it

	running   atomic.Int64                                         // runs whose function has not returned, across terms
	finishes  *batchQueue[ledger.Run]                              // history entries on their way to the ledger (batch.go); nil without a Ledger
	onRefused atomic.Pointer[func(context.Context, RefusedStreak)] // OnClaimsRefused (refused.go)

	mu      sync.Mutex
	jobs    []*jobState // the job set; replaced, never modified, by SetJobs (reload.go)
	removed []*jobState // jobs SetJobs removed whose runs may still be going
	leading bool
	term    *termRun   // nil between terms
	ended   []*termRun // ended terms that had runs still going

	lateMu sync.Mutex
	kept   []keptLate // late notes of ended terms not written yet (account_late.go)
}

// jobState is one version of one job of a Host: its settings, parsed
// schedule and pipeline, which never change (SetJobs makes a new version),
// and, shared by every version of the job, what the Host keeps of it
// (jobLife).
type jobState struct {
	Job
	sched    cron.Schedule
	pipeline runFunc     // the steps every run of the job goes through (pipeline.go)
	since    time.Time   // when SetJobs added the job or changed its schedule; zero if New did
	retired  atomic.Bool // replaced or removed by SetJobs: its pending tick does not fire (set with mu held)

	*jobLife
}

// jobLife is the state of a job across its versions and terms.
type jobLife struct {
	mu        sync.Mutex    // guards the fields below
	active    int           // runs of this job going in this process, any term (admit.go)
	queue     []queued      // ticks waiting (OverlapQueue), of the term leading now
	term      *termRun      // the term leading now, nil between terms
	lastTurn  chan struct{} // the latest claim turn taken (claim.go)
	next      time.Time     // next tick while leading
	scheduled *jobState     // the version whose next tick is in the loop's timeline (loop.go), nil if none
	recent    []pastRun     // at most recentRuns, a ring once full
	oldest    int           // index of the oldest entry of a full ring
	skipped   int64
}

// New copies cfg, applies defaults, parses every schedule and validates.
// A bad spec, a duplicate name or a missing function is an error naming
// the job and the value; nothing is checked later, at election time.
func New(cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	h := &Host{cfg: cfg, log: cfg.Logger, clock: newRealClock()}
	h.ctxObs, _ = cfg.Observer.(ContextObserver)
	h.started = h.wallNow()
	if l := cfg.Ledger; l != nil {
		h.finishes = newBatchQueue(l.MaxBatch(), finishesInflight, func(rs []ledger.Run) []error {
			ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
			defer cancel()
			return l.Finish(ctx, rs)
		})
	}
	jobs, err := h.newJobs(cfg.Jobs)
	if err != nil {
		return nil, err
	}
	h.jobs = jobs
	return h, nil
}

// newJobs returns a new version of each of jobs (defaults applied,
// validated), each with a jobLife of its own.
func (h *Host) newJobs(jobs []Job) ([]*jobState, error) {
	plain, timed := h.pipeline(false), h.pipeline(true)
	out := make([]*jobState, 0, len(jobs))
	for _, j := range jobs {
		s, err := ParseSchedule(j.Schedule)
		if err != nil { // Validate parsed it already
			return nil, err
		}
		js := &jobState{Job: j, sched: s, pipeline: plain, jobLife: &jobLife{}}
		if j.Timeout > 0 {
			js.pipeline = timed
		}
		out = append(out, js)
	}
	return out, nil
}

// jobSet returns the job set now. The slice is never modified.
func (h *Host) jobSet() []*jobState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.jobs
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

// Lead runs the jobs of term until ctx ends, then stops starting runs and
// waits for the runs in flight, and returns. It is a lead function for
// election.Elector.Run: elector.Run(ctx, host.Lead). Outside an Elector,
// pass a term from election.NewTerm. It blocks; it must not be called
// concurrently with itself.
//
// Runs go under term.Context(), not ctx: a graceful stop does not cancel
// them. Before each start Lead calls term.Check.
//
// How it stops depends on context.Cause(ctx):
//   - wrapping election.ErrLeadershipLost: runs are cancelled at once (their
//     contexts end with that cause); Lead waits up to ShutdownTimeout for
//     them to return;
//   - anything else (a graceful stop, election.ErrSteppingDown): runs keep
//     going for up to ShutdownTimeout, then are cancelled with
//     ErrShutdownTimeout, then Lead waits up to KillGrace more.
//
// If the ledger says the term is stale, Lead calls term.Lose, stops as on
// a loss and returns an error wrapping election.ErrLeadershipLost. It returns an error too if
// runs were still going when it gave up waiting.
//
// With a Control store, Lead records the term there (terms.go): its start
// on a goroutine of its own, not in the way of the first ticks, and how
// it ended (lost, shut down, stepped down, released) once the drain is
// over, before it returns. Unless Config.NoAccounting, it also keeps the
// term's tick accounting there (account.go), on a goroutine of the term:
// its last write, after the drain, may hold Lead's return up to
// ledgerTimeout (5 s).
func (h *Host) Lead(ctx context.Context, term election.Term) error {
	h.mu.Lock()
	if h.leading {
		h.mu.Unlock()
		return errors.New("schedulerhost: Lead called while already leading")
	}
	h.leading = true
	h.mu.Unlock()

	rec := h.recordStart(term)
	err := h.lead(ctx, term)
	rec.end(ctx, err)
	return err
}

// lead is Lead once the Host is marked leading: the term's catch-up, loop
// and drain. It marks the Host not leading when the term is closed.
func (h *Host) lead(ctx context.Context, term election.Term) error {
	sc := newSchedClock(h.clock)
	t, loopCtx := h.newTerm(ctx, term)
	t.open()
	defer t.waitBackground() // after close has ended the term's contexts (refused.go)
	defer t.close()
	t.acct.start() // its writer: finish ends it, below

	h.log.Info("leading: running schedules", "token", t.token, "jobs", len(h.jobSet()))
	// Missed ticks are claimed before the loop starts, so that no regular
	// tick of a job is claimed ahead of them (catchup.go).
	if h.cfg.Ledger != nil {
		t.catchUp(loopCtx, sc.at)
		t.caughtUp(loopCtx, sc.at)
		t.settle(loopCtx) // what earlier terms left running (settle.go)
	}
	var polled chan struct{}
	if h.cfg.Control != nil {
		polled = make(chan struct{})
		go func() {
			defer close(polled)
			t.pollRunNow(loopCtx)
		}()
	}
	t.loop(loopCtx, sc)
	// The drain comes at once: it marks the term stopping, so the poll
	// starts no run now from then on (startManual's begin), and the runs
	// it started before are counted. The poll may still be waiting on the
	// store, whose client need not give up when its context ends (go-redis
	// waits for its read timeout): the end of the term is not held up by
	// it, only Lead's return.
	err := t.drain(context.Cause(loopCtx))
	if polled != nil {
		<-polled
	}
	t.acct.finish() // the last write, once the drain knows the last finishes
	return err
}
