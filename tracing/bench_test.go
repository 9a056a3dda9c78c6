package tracing_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

// discard is an exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkStartRun is the tracing of one run on the SDK, sampled and
// batched to an exporter that drops it: StartRun, TraceID, the end.
func BenchmarkStartRun(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	defer tp.Shutdown(context.Background())
	tr := tracing.NewTracer(tp, "billing")
	now := time.Now()
	s := schedulerhost.RunSpan{Job: "invoice", Tick: now, Token: 7, Kind: schedulerhost.RunScheduled, Start: now, Lateness: time.Millisecond}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		rctx, end := tr.StartRun(ctx, s)
		_ = tr.TraceID(rctx)
		end(schedulerhost.RunEnd{Ran: true, Result: "ok", Attempts: 1, End: now})
	}
}
