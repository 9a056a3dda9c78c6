package httpjob

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

// TestRun_TraceParent: a traced run's request carries the W3C
// traceparent (and tracestate) of the run's span, as the Tracer starts
// it; an untraced run's, none.
func TestRun_TraceParent(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer srv.Close()
	j, err := New("report", "orders", "node-a", Request{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	ts, err := trace.ParseTraceState("vendor=v1")
	if err != nil {
		t.Fatal(err)
	}
	parent := trace.ContextWithSpanContext(runCtx(42, 1), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true}))
	ctx, end := tracing.NewTracer(tp, "orders").StartRun(parent, schedulerhost.RunSpan{Job: "report", Tick: tick, Token: 42, Kind: schedulerhost.RunScheduled})
	if err := j.Run(ctx); err != nil {
		t.Fatal(err)
	}
	end(schedulerhost.RunEnd{Ran: true})
	h := <-got
	sc := exp.GetSpans()[0].SpanContext
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; h.Get("traceparent") != want {
		t.Errorf("traceparent %q, want %q", h.Get("traceparent"), want)
	}
	if h.Get("tracestate") != "vendor=v1" {
		t.Errorf("tracestate %q, want vendor=v1", h.Get("tracestate"))
	}
	if err := j.Run(runCtx(42, 1)); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get("traceparent") != "" {
		t.Errorf("an untraced run sent traceparent %q", h.Get("traceparent"))
	}
}
