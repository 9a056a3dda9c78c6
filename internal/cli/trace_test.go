package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/batonhq/baton/internal/etcdtest"
)

// TestNode_TracesFromEnv: `baton run` with an OTLP endpoint in the
// environment traces its runs: the HTTP job's request carries a
// traceparent, and a real OTLP/HTTP server receives that span, named for
// the job, by the time Node returns. A bad OTEL_* value stops the node
// before it opens its backend, naming the variable.
func TestNode_TracesFromEnv(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	srv := etcdtest.Start(t)
	parents := make(chan string, 100)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { parents <- r.Header.Get("traceparent") }))
	defer app.Close()
	spans := make(chan string, 100) // "name trace span"
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("%s: not an OTLP export: %v", r.URL.Path, err)
		}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					spans <- fmt.Sprintf("%s %x %x", s.GetName(), s.GetTraceId(), s.GetSpanId())
				}
			}
		}
	}))
	defer collector.Close()
	path := writeConfig(t, fmt.Sprintf("election:\n  name: traced\n  ttl: 2s\n  shutdown_timeout: 2s\nbackend:\n  kind: etcd\n  endpoints: [%s]\n"+
		"jobs:\n  - {name: report, schedule: \"@every 1s\", http: {url: %q}}\n", srv.Endpoint(), app.URL))
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	p := &Program{Name: "baton", Getenv: env(nil)}
	err := p.Node(t.Context(), "run", []string{"--config", path, "--http", ""}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `OTEL_TRACES_EXPORTER "zipkin"`) {
		t.Errorf("OTEL_TRACES_EXPORTER=zipkin: %v, want an error naming it", err)
	}

	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Node(ctx, "run", []string{"--config", path, "--http", ""}, io.Discard, io.Discard) }()
	var parent string
	select {
	case parent = <-parents:
	case <-time.After(30 * time.Second):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Node: %v", err)
	}
	f := strings.Split(parent, "-")
	if len(f) != 4 {
		t.Fatalf("the app got traceparent %q, want one", parent)
	}
	want := "report " + f[1] + " " + f[2]
	for {
		select {
		case s := <-spans:
			if s == want {
				return
			}
		default:
			t.Fatalf("the collector did not receive the span %q", want)
		}
	}
}
