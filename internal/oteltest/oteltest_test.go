package oteltest

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// exportTwo exports a parent span and a child through exp, synchronously
// (WithSyncer: End returns once the collector answered), and returns
// them as the SDK saw them.
func exportTwo(t *testing.T, exp sdktrace.SpanExporter, via string) (parent, child sdktrace.ReadOnlySpan, sent time.Time) {
	t.Helper()
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "oteltest-"+via), attribute.Int64("res.n", 7))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	defer func() {
		if err := tp.Shutdown(ctx); err != nil {
			t.Errorf("tracer provider shutdown: %v", err)
		}
	}()
	tr := tp.Tracer("baton/oteltest", trace.WithInstrumentationVersion("v0.0.1"))
	pctx, p := tr.Start(ctx, "parent "+via, trace.WithSpanKind(trace.SpanKindServer))
	_, c := tr.Start(pctx, "child "+via, trace.WithAttributes(
		attribute.String("s", "text"),
		attribute.Int64("i", -42),
		attribute.Int64("big", 1<<62+1), // beyond float64's exact integers
		attribute.Float64("f", 2.5),
		attribute.Bool("b", true),
		attribute.StringSlice("ss", []string{"a", "b"}),
	))
	c.AddEvent("tick", trace.WithAttributes(attribute.Int("n", 3), attribute.String("why", "test")))
	c.SetStatus(codes.Error, "boom")
	c.End()
	p.End()
	sent = time.Now()
	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans ended, want 2", len(ended))
	}
	return ended[1], ended[0], sent
}

func TestExportOverGRPCAndHTTP(t *testing.T) {
	c := Start(t)
	ctx := context.Background()
	grpcExp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(c.GRPCEndpoint()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	httpExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(c.HTTPEndpoint()+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		via string
		exp sdktrace.SpanExporter
	}{{"grpc", grpcExp}, {"http", httpExp}} {
		t.Run(tc.via, func(t *testing.T) {
			parent, child, sent := exportTwo(t, tc.exp, tc.via)
			spans := c.WaitSpans(t, 2*(i+1), 5*time.Second)
			t.Logf("%d spans in the file %v after the export returned", len(spans), time.Since(sent).Round(time.Millisecond))
			got := spans[2*i:]
			if len(got) != 2 {
				t.Fatalf("got %d new spans, want 2: %s", len(got), summary(got))
			}
			checkSpan(t, got[0], child, tc.via)
			checkSpan(t, got[1], parent, tc.via)
			if got[0].ParentSpanID != got[1].SpanID || got[1].ParentSpanID != "" || got[0].TraceID != got[1].TraceID {
				t.Errorf("child's parent %q, trace %q; parent's id %q, parent %q, trace %q",
					got[0].ParentSpanID, got[0].TraceID, got[1].SpanID, got[1].ParentSpanID, got[1].TraceID)
			}
		})
	}
	if t.Failed() {
		return
	}
	// A line the exporter has begun but not ended is left for later: half
	// of the file's first line appended changes nothing until it ends.
	b, err := os.ReadFile(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	first := b[:bytes.IndexByte(b, '\n')+1]
	before, _ := c.Spans()
	appendFile(t, c.Path(), first[:len(first)/2])
	if after, err := c.Spans(); err != nil || !reflect.DeepEqual(after, before) {
		t.Errorf("with half a line appended: %d spans, %v; want the %d before", len(after), err, len(before))
	}
	appendFile(t, c.Path(), first[len(first)/2:])
	// WithSyncer exports each span as it ends: a line holds one.
	if after, err := c.Spans(); err != nil || len(after) != len(before)+1 || !reflect.DeepEqual(after[len(before)], before[0]) {
		t.Errorf("with the line ended: %d spans, %v; want %d, the first again", len(after), err, len(before)+1)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkSpan compares a span read back from the file with the one the SDK
// exported.
func checkSpan(t *testing.T, got Span, want sdktrace.ReadOnlySpan, via string) {
	t.Helper()
	sc := want.SpanContext()
	if got.TraceID != sc.TraceID().String() || got.SpanID != sc.SpanID().String() || got.Name != want.Name() {
		t.Errorf("span %q %s/%s; want %q %s/%s", got.Name, got.TraceID, got.SpanID, want.Name(), sc.TraceID(), sc.SpanID())
	}
	wantParent := ""
	if want.Parent().IsValid() {
		wantParent = want.Parent().SpanID().String()
	}
	if got.ParentSpanID != wantParent {
		t.Errorf("%s: parent %q, want %q", got.Name, got.ParentSpanID, wantParent)
	}
	if !got.StartTime.Equal(want.StartTime()) || !got.EndTime.Equal(want.EndTime()) {
		t.Errorf("%s: times %v..%v, want %v..%v", got.Name, got.StartTime, got.EndTime, want.StartTime(), want.EndTime())
	}
	if int(got.Kind) != int(want.SpanKind()) {
		t.Errorf("%s: kind %v, want %v", got.Name, got.Kind, want.SpanKind())
	}
	if !reflect.DeepEqual(got.Attributes, attrMap(want.Attributes())) {
		t.Errorf("%s: attributes\n %#v\nwant\n %#v", got.Name, got.Attributes, attrMap(want.Attributes()))
	}
	// The SDK numbers its codes otherwise than OTLP (its Error is 1).
	code := map[codes.Code]StatusCode{codes.Unset: StatusUnset, codes.Ok: StatusOK, codes.Error: StatusError}[want.Status().Code]
	if wantStatus := (Status{Code: code, Message: want.Status().Description}); got.Status != wantStatus {
		t.Errorf("%s: status %+v, want %+v", got.Name, got.Status, wantStatus)
	}
	if len(got.Events) != len(want.Events()) {
		t.Fatalf("%s: %d events, want %d", got.Name, len(got.Events), len(want.Events()))
	}
	for i, e := range want.Events() {
		g := got.Events[i]
		if g.Name != e.Name || !g.Time.Equal(e.Time) || !reflect.DeepEqual(g.Attributes, attrMap(e.Attributes)) {
			t.Errorf("%s: event %+v, want %q at %v with %v", got.Name, g, e.Name, e.Time, attrMap(e.Attributes))
		}
	}
	wantRes := map[string]any{"service.name": "oteltest-" + via, "res.n": int64(7)}
	if !reflect.DeepEqual(got.Resource, wantRes) {
		t.Errorf("%s: resource %v, want %v", got.Name, got.Resource, wantRes)
	}
	if got.Scope != "baton/oteltest" || got.ScopeVersion != "v0.0.1" {
		t.Errorf("%s: scope %q %q", got.Name, got.Scope, got.ScopeVersion)
	}
}

// attrMap is what Span.Attributes should hold for kvs; nil for none.
func attrMap(kvs []attribute.KeyValue) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	m := map[string]any{}
	for _, kv := range kvs {
		switch kv.Value.Type() {
		case attribute.STRINGSLICE:
			var a []any
			for _, s := range kv.Value.AsStringSlice() {
				a = append(a, s)
			}
			m[string(kv.Key)] = a
		default:
			m[string(kv.Key)] = kv.Value.AsInterface()
		}
	}
	return m
}
