package execjob_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/execjob"
	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

// TestCommand_EnvTraceParent: a traced run's command prints
// $TRACEPARENT, the run's span as W3C Trace Context, and no TRACESTATE
// (empty), under a real Host.
func TestCommand_EnvTraceParent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	l := newLines()
	cmd := &execjob.Command{Job: "traced", Script: `echo "tp=$TRACEPARENT ts=${TRACESTATE-unset}"`, Election: "reports", Instance: "node-7",
		Logger: slog.New(l)}
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs:   []schedulerhost.Job{{Name: "traced", Schedule: "* * * * * *", Run: cmd.Run}},
		Tracer: tracing.NewTracer(tp, "reports"), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := lead(t, memory.New(election.Timing{}), "node-7", host)
	var line string
	select {
	case line = <-l.c:
	case <-time.After(10 * time.Second):
	}
	stop()
	spans := exp.GetSpans()
	if line == "" || len(spans) == 0 {
		t.Fatalf("no run within 10 s: line %q, %d spans", line, len(spans))
	}
	sc := spans[0].SpanContext
	if want := "tp=00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01 ts=unset"; line != want {
		t.Errorf("the command printed %q, want %q", line, want)
	}
}
