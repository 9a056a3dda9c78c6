package baton_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// TestTracing_ExemplarAndFlush: with a TracerProvider, a run's span
// reaches the exporter by Run's return (flushed, though the batcher
// would wait a minute), and /metrics in the OpenMetrics format shows
// the run's trace as the exemplar of its lateness.
func TestTracing_ExemplarAndFlush(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Minute)))
	defer tp.Shutdown(context.Background())
	ran := make(chan trace.SpanContext, 10)
	b, err := baton.New(baton.Config{
		Backend: memory.New(election.Timing{}).Candidate(), Election: "traced", Instance: "one",
		Jobs: []baton.Job{{Name: "j", Schedule: "@every 1s", Run: func(ctx context.Context) error {
			ran <- trace.SpanFromContext(ctx).SpanContext()
			return nil
		}}},
		Advanced: baton.Advanced{TracerProvider: tp}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var sc trace.SpanContext
	select {
	case sc = <-ran:
	case <-time.After(10 * time.Second):
	}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	rec := httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, req)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !sc.IsValid() {
		t.Fatal("no run with a span within 10 s")
	}
	body, _ := io.ReadAll(rec.Body)
	re := regexp.MustCompile(`(?m)^baton_job_lateness_seconds_bucket\{[^}]*job="j"[^}]*\} \d+ # \{trace_id="([0-9a-f]{32})"\}`)
	ids := map[string]bool{}
	for _, m := range re.FindAllSubmatch(body, -1) {
		ids[string(m[1])] = true
	}
	if !ids[sc.TraceID().String()] {
		t.Errorf("no lateness exemplar with the run's trace %s; exemplars %v; /metrics:\n%s", sc.TraceID(), ids, grepLateness(body))
	}
	var exported bool
	for _, s := range exp.GetSpans() {
		exported = exported || s.SpanContext.SpanID() == sc.SpanID()
	}
	if !exported {
		t.Errorf("the run's span was not exported by Run's return (%d spans)", len(exp.GetSpans()))
	}
}

// grepLateness is the lateness lines of a scrape.
func grepLateness(body []byte) string {
	return strings.Join(regexp.MustCompile(`(?m)^baton_job_lateness.*$`).FindAllString(string(body), -1), "\n")
}
