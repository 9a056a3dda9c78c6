package tracing_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// recorder is a real SDK provider whose spans land in memory as they end.
type recorder struct {
	tp  *sdktrace.TracerProvider
	exp *tracetest.InMemoryExporter
}

func newRecorder(t *testing.T) *recorder {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &recorder{tp: tp, exp: exp}
}

// spans returns the ended spans named name.
func (r *recorder) spans(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range r.exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// lead runs a Host of cfg as instance name on m, with the Tracer of rec
// for the election "billing", until the returned stop.
func lead(t *testing.T, m *memory.Server, name string, rec *recorder, cfg schedulerhost.Config) (stop func()) {
	t.Helper()
	e, err := election.New(election.Config{Backend: m.Candidate(), Identity: election.Identity{ID: name}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger, cfg.Ledger, cfg.Instance = quiet, m.Ledger(), name
	cfg.Tracer = tracing.NewTracer(rec.tp, "billing")
	h, err := schedulerhost.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, h.Lead) }()
	synctest.Wait()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: Run: %v", name, err)
		}
	}
}

func newMemory() *memory.Server { return memory.New(election.Timing{TTL: 5 * time.Second}) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// seen is what a Go job found in its context.
type seen struct {
	mu    sync.Mutex
	spans []trace.SpanContext
	ticks []time.Time
	token uint64
}

func (s *seen) add(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spans = append(s.spans, trace.SpanFromContext(ctx).SpanContext())
	tick, _ := schedulerhost.TickFromContext(ctx)
	s.ticks = append(s.ticks, tick.Time)
	s.token, _ = election.TokenFromContext(ctx)
}

// TestRunSpan: each run is a span named for its job with the run's
// attributes, and the job's context carries it (with the tick still).
func TestRunSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t)
		var s seen
		time.Sleep(300 * time.Millisecond)
		stop := lead(t, newMemory(), "a", rec, schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "invoice", Schedule: "@every 1s",
			Run: func(ctx context.Context) error { s.add(ctx); return nil }}}})
		time.Sleep(2500 * time.Millisecond)
		stop()
		got := rec.spans("invoice")
		if len(got) != 2 || len(s.spans) != 2 {
			t.Fatalf("%d spans, %d runs; want 2 of each", len(got), len(s.spans))
		}
		for i, sp := range got {
			if !s.spans[i].IsValid() || s.spans[i].SpanID() != sp.SpanContext.SpanID() || s.spans[i].TraceID() != sp.SpanContext.TraceID() {
				t.Errorf("run %d: the job's context holds span %v, exported %v", i, s.spans[i], sp.SpanContext)
			}
			a := attrs(sp)
			want := map[attribute.Key]attribute.Value{
				"job.system": attribute.StringValue("baton"), tracing.AttrElection: attribute.StringValue("billing"),
				tracing.AttrJob: attribute.StringValue("invoice"), tracing.AttrTick: attribute.StringValue(stamp(s.ticks[i])),
				tracing.AttrToken: attribute.Int64Value(int64(s.token)), tracing.AttrAttempts: attribute.IntValue(1),
				tracing.AttrRunKind: attribute.StringValue("scheduled"), tracing.AttrResult: attribute.StringValue("ok"),
			}
			for k, v := range want {
				if a[k] != v {
					t.Errorf("run %d: %s = %v, want %v", i, k, a[k].Emit(), v.Emit())
				}
			}
			if l, ok := a[tracing.AttrLateness]; !ok || l.AsFloat64() < 0 || l.AsFloat64() > 0.1 {
				t.Errorf("run %d: %s = %v, want a lateness in [0, 0.1]", i, tracing.AttrLateness, l.Emit())
			}
			if sp.Status.Code != codes.Unset || sp.Parent.IsValid() {
				t.Errorf("run %d: status %v, parent %v; want unset, a root span", i, sp.Status, sp.Parent)
			}
		}
		if s.token == 0 {
			t.Error("no token in the job's context")
		}
	})
}

// TestRunSpan_Failed: a failed run's span has an error status and
// counts every attempt.
func TestRunSpan_Failed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t)
		time.Sleep(300 * time.Millisecond)
		stop := lead(t, newMemory(), "a", rec, schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "flaky", Schedule: "@every 10s",
			Retries: 1, RetryBackoff: 100 * time.Millisecond,
			Run: func(ctx context.Context) error { return errors.New("disk full") }}}})
		time.Sleep(10 * time.Second)
		stop()
		got := rec.spans("flaky")
		if len(got) != 1 {
			t.Fatalf("%d spans, want 1", len(got))
		}
		a := attrs(got[0])
		if got[0].Status.Code != codes.Error || !strings.Contains(got[0].Status.Description, "disk full") {
			t.Errorf("status %+v, want an error saying disk full", got[0].Status)
		}
		if a[tracing.AttrResult].AsString() != "failed" || a[tracing.AttrAttempts].AsInt64() != 2 {
			t.Errorf("result %v, attempts %v; want failed, 2", a[tracing.AttrResult].Emit(), a[tracing.AttrAttempts].Emit())
		}
	})
}

// TestRunSpan_Manual: a run now's span says so, with its request.
func TestRunSpan_Manual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t)
		m := newMemory()
		stop := lead(t, m, "a", rec, schedulerhost.Config{Control: m.Control(), NoAccounting: true, Jobs: []schedulerhost.Job{{
			Name: "report", Schedule: "0 0 1 1 *", Run: func(context.Context) error { return nil }}}})
		if _, _, err := control.NewJobs(m.Control()).RequestRun(t.Context(), control.RunRequest{ID: "req-1", Job: "report", By: "bob", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		stop()
		got := rec.spans("report")
		if len(got) != 1 {
			t.Fatalf("%d spans, want 1", len(got))
		}
		a := attrs(got[0])
		if a[tracing.AttrRunKind].AsString() != "manual" || a[tracing.AttrRequestID].AsString() != "req-1" {
			t.Errorf("kind %v, request %v; want manual, req-1", a[tracing.AttrRunKind].Emit(), a[tracing.AttrRequestID].Emit())
		}
	})
}
