// Package tracing traces a Host's runs, and the ticks that did not run,
// with OpenTelemetry (docs/tracing.md): Tracer implements
// schedulerhost.Tracer on a trace.TracerProvider, so that schedulerhost
// links no tracing SDK; FromEnv builds a provider from the standard
// OTEL_* variables; Inject and Env carry a run's span to an HTTP job's
// request and a command job's environment, as W3C Trace Context.
package tracing

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// ScopeName is the instrumentation scope of baton's spans.
const ScopeName = "github.com/batonhq/baton"

// MaxTickSpans is the most spans of single ticks a range of ticks that
// did not run gives: the ticks after them share one span (baton.ticks,
// baton.tick.first, baton.tick.last).
const MaxTickSpans = 100

// FlushTimeout bounds the flush of the spans at the end of Run, and the
// shutdown of a provider FromEnv made.
const FlushTimeout = 5 * time.Second

// Attribute keys of baton's spans (docs/tracing.md).
const (
	AttrElection    = attribute.Key("baton.election")
	AttrJob         = attribute.Key("baton.job")
	AttrTick        = attribute.Key("baton.tick")
	AttrToken       = attribute.Key("baton.token")
	AttrAttempts    = attribute.Key("baton.attempts")
	AttrRunKind     = attribute.Key("baton.run.kind")
	AttrCatchUpFrom = attribute.Key("baton.catch_up.from")
	AttrCatchUpTo   = attribute.Key("baton.catch_up.to")
	AttrLateness    = attribute.Key("baton.lateness_s")
	AttrResult      = attribute.Key("baton.result")
	AttrRequestID   = attribute.Key("baton.request_id")
	AttrClass       = attribute.Key("baton.class")
	AttrReason      = attribute.Key("baton.reason")
	AttrError       = attribute.Key("baton.error")
	AttrTicks       = attribute.Key("baton.ticks")
	AttrTickFirst   = attribute.Key("baton.tick.first")
	AttrTickLast    = attribute.Key("baton.tick.last")
	AttrJobSystem   = attribute.Key("job.system")
)

// Tracer implements schedulerhost.Tracer on an OpenTelemetry
// TracerProvider, for one election.
type Tracer struct {
	tracer   trace.Tracer
	election attribute.KeyValue
}

var _ schedulerhost.Tracer = (*Tracer)(nil)

// NewTracer returns the Tracer of election's runs on tp.
func NewTracer(tp trace.TracerProvider, election string) *Tracer {
	return &Tracer{tracer: tp.Tracer(ScopeName), election: AttrElection.String(election)}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// StartRun implements schedulerhost.Tracer: a span named for the job,
// from the run's start.
func (t *Tracer) StartRun(ctx context.Context, s schedulerhost.RunSpan) (context.Context, func(schedulerhost.RunEnd)) {
	attrs := []attribute.KeyValue{AttrJobSystem.String("baton"), t.election, AttrJob.String(s.Job),
		AttrTick.String(stamp(s.Tick)), AttrToken.Int64(int64(s.Token)), AttrRunKind.String(string(s.Kind)),
		AttrLateness.Float64(max(s.Lateness, 0).Seconds())}
	if s.Kind == schedulerhost.RunCatchUp && !s.CatchUpFrom.IsZero() {
		attrs = append(attrs, AttrCatchUpFrom.String(stamp(s.CatchUpFrom)), AttrCatchUpTo.String(stamp(s.Tick)))
	}
	if s.RequestID != "" {
		attrs = append(attrs, AttrRequestID.String(s.RequestID))
	}
	ctx, span := t.tracer.Start(ctx, s.Job, trace.WithTimestamp(s.Start), trace.WithAttributes(attrs...))
	return ctx, func(e schedulerhost.RunEnd) {
		span.SetAttributes(AttrAttempts.Int(e.Attempts))
		if e.Ran {
			span.SetAttributes(AttrResult.String(string(e.Result)))
			if e.Result != ledger.ResultOK {
				msg := string(e.Result)
				if e.Err != nil {
					msg = e.Err.Error()
				}
				span.SetStatus(codes.Error, msg)
			}
		}
		span.End(trace.WithTimestamp(e.End))
	}
}

// TraceID implements schedulerhost.Tracer.
func (t *Tracer) TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// TickNotRun implements schedulerhost.Tracer: a short span of its own
// per tick, from when the term recorded it, up to MaxTickSpans of a
// range; one more for the rest.
func (t *Tracer) TickNotRun(n schedulerhost.NotRun) {
	common := []attribute.KeyValue{AttrJobSystem.String("baton"), t.election, AttrJob.String(n.Job),
		AttrToken.Int64(int64(n.Token)), AttrClass.String(string(n.Class)), AttrReason.String(string(n.Reason))}
	if n.Error != "" {
		common = append(common, AttrError.String(n.Error))
	}
	name := n.Job + ": " + string(n.Class)
	ticks := n.Ticks(MaxTickSpans + 1)
	for i, tick := range ticks {
		if i == MaxTickSpans {
			rest := append(common[:len(common):len(common)], AttrTicks.Int64(n.Count-MaxTickSpans),
				AttrTickFirst.String(stamp(tick)), AttrTickLast.String(stamp(n.Last)))
			t.notRunSpan(name, n.At, rest)
			return
		}
		t.notRunSpan(name, n.At, append(common[:len(common):len(common)], AttrTick.String(stamp(tick))))
	}
}

func (t *Tracer) notRunSpan(name string, at time.Time, attrs []attribute.KeyValue) {
	_, span := t.tracer.Start(context.Background(), name, trace.WithNewRoot(), trace.WithTimestamp(at), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(at))
}

var propagator = propagation.TraceContext{}

// The environment variables of Env.
const (
	EnvTraceParent = "TRACEPARENT"
	EnvTraceState  = "TRACESTATE"
)

// Inject sets the W3C traceparent (and tracestate) of the span in ctx on
// h; nothing if ctx carries no valid span.
func Inject(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Env returns TRACEPARENT (and TRACESTATE, when not empty) of the span in
// ctx as NAME=value entries for a process's environment; none if ctx
// carries no valid span.
func Env(ctx context.Context) []string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := propagation.MapCarrier{}
	propagator.Inject(ctx, m)
	env := []string{EnvTraceParent + "=" + m.Get("traceparent")}
	if v := m.Get("tracestate"); v != "" {
		env = append(env, EnvTraceState+"="+v)
	}
	return env
}
