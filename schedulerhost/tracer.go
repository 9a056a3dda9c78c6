package schedulerhost

import (
	"context"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/ledger"
)

// Tracing: a span per run and one per tick that did not run, through
// Config.Tracer, a hook this package declares so that it links no
// tracing SDK (package tracing implements it on OpenTelemetry). With no
// Tracer the pipeline has no traceStep and nothing is built per run.
//
// traceStep wraps observeStep, so that the span covers every attempt and
// the Observer's RunStartedContext sees the run's context with the span;
// it stamps the run's start, which observeStep then keeps. The ticks that
// did not run are told by the accountant as it records them (account.go):
// only with the tick accounting on (a control store, and not
// Config.NoAccounting).

// Tracer is told about each run and each tick that did not run. Its
// methods are called on the Host's goroutines and must not block.
type Tracer interface {
	// StartRun is called once per run, before its first attempt, with
	// the run's context. It returns the context the attempts get (a child
	// of ctx, which keeps the run's values: TickFromContext,
	// AttemptFromContext, ...) and a function the Host calls once, when
	// the run is over.
	StartRun(ctx context.Context, s RunSpan) (context.Context, func(RunEnd))
	// TraceID returns the trace ID, in hex, of the span that a context
	// StartRun returned carries, if it is sampled; "" otherwise.
	TraceID(ctx context.Context) string
	// TickNotRun is called when the term records ticks of a job as not
	// run (skipped, covered, missed, refused, lost): a range of
	// consecutive ticks of its schedule.
	TickNotRun(n NotRun)
}

// RunKind says why a run happened.
type RunKind string

// Run kinds, as BATON_RUN_KIND and the Baton-Run-Kind header name them.
const (
	RunScheduled RunKind = "scheduled" // a due tick
	RunCatchUp   RunKind = "catch-up"  // ticks missed while nobody led, or skipped by a clock step
	RunManual    RunKind = "manual"    // a run now
)

// RunSpan is what a Tracer is told of a run at its start.
type RunSpan struct {
	Job   string
	Tick  time.Time // the nominal time; a run now's, its request's time
	Token uint64    // the term's fencing token
	Kind  RunKind
	// CatchUpFrom is, for a catch-up run, the earliest missed tick it
	// stands for (Tick is the last); zero otherwise.
	CatchUpFrom time.Time
	Start       time.Time     // when the run started (wall clock)
	Lateness    time.Duration // Start minus the tick (plus its jitter delay)
	RequestID   string        // a run now's request id; empty otherwise
}

// RunEnd is what a Tracer is told of a run at its end.
type RunEnd struct {
	Ran      bool          // the job function was called; false: stopped before it was
	Result   ledger.Result // with Ran
	Err      error         // with Ran, the last attempt's error
	Attempts int
	End      time.Time
}

// NotRun is a range of consecutive ticks of a job that did not run, as the
// term recorded them.
type NotRun struct {
	Job    string
	Class  audit.Class
	Reason audit.Reason
	Error  string // the first tick's, if any
	First  time.Time
	Last   time.Time
	Count  int64
	Token  uint64    // the recording term's fencing token
	At     time.Time // when the term recorded them
	next   audit.Next
}

// Ticks returns the first n ticks of the range at most, oldest first.
func (n NotRun) Ticks(limit int) []time.Time {
	if n.Count <= 0 || limit <= 0 {
		return nil
	}
	out := []time.Time{n.First}
	for t := n.First; int64(len(out)) < n.Count && len(out) < limit; {
		if n.next == nil {
			if n.Last.After(t) {
				out = append(out, n.Last)
			}
			break
		}
		t = n.next(t)
		if t.IsZero() || t.After(n.Last) {
			break
		}
		out = append(out, t)
	}
	return out
}

// NewNotRun returns a NotRun whose ticks are those of next from first to
// last: for a Tracer's tests.
func NewNotRun(n NotRun, next func(time.Time) time.Time) NotRun {
	n.next = next
	return n
}

type traceIDKey struct{}

// TraceIDFromContext returns the trace ID, in hex, of the run ctx belongs
// to if a Tracer traces it and the span is sampled; "" otherwise. An
// Observer (metrics) reads it for exemplars without linking a tracing
// SDK.
func TraceIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(traceIDKey{}).(string)
	return id
}

// ContextObserver is an Observer that is told the run's context at its
// start (for an exemplar with its trace: TraceIDFromContext). A Host
// calls RunStartedContext instead of RunStarted if its Observer
// implements it.
type ContextObserver interface {
	RunStartedContext(ctx context.Context, job string, tick time.Time, lateness time.Duration)
}

// kind is r's RunKind.
func (r *tickRun) kind() RunKind {
	switch {
	case r.manual != nil:
		return RunManual
	case r.tick.CatchUp:
		return RunCatchUp
	}
	return RunScheduled
}

// traceStep starts the run's span (Config.Tracer) before observeStep and
// ends it once every attempt is over. It stamps the run's start, so that
// the span and the Observer see one lateness.
func traceStep(next runFunc) runFunc {
	return func(r *tickRun) {
		h := r.t.h
		tr := h.cfg.Tracer
		r.started, r.startedMono = h.clock.now()
		s := RunSpan{Job: r.job.Name, Tick: r.tick.Time, Token: r.t.token, Kind: r.kind(),
			Start: r.started, Lateness: r.started.Sub(r.tick.Time.Add(r.delay))}
		if r.tick.CatchUp {
			s.CatchUpFrom = r.tick.CatchUpFrom
		}
		if r.manual != nil {
			s.RequestID = r.manual.RequestID
		}
		parent := r.ctx
		ctx, end := tr.StartRun(parent, s)
		r.ctx, r.traceID = ctx, tr.TraceID(ctx)
		next(r)
		r.ctx = parent
		e := RunEnd{Ran: r.ran, Attempts: int(r.attempt.Load()), End: r.ended}
		if r.ran {
			e.Result, e.Err = r.result, r.err
		} else {
			e.End, _ = h.clock.now()
		}
		end(e)
	}
}
