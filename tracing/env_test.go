package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/batonhq/baton/tracing"
)

// clearEnv unsets the variables FromEnv reads, for this test.
func clearEnv(t *testing.T) {
	for _, k := range []string{tracing.EnvExporter, tracing.EnvEndpoint, tracing.EnvTracesEndpoint, tracing.EnvProtocol,
		tracing.EnvTracesProtocol, tracing.EnvResourceAttrs, "OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
	}
}

func TestFromEnv_OffByDefault(t *testing.T) {
	for _, env := range [][2]string{{"", ""}, {tracing.EnvExporter, "none"}} {
		clearEnv(t)
		t.Setenv(tracing.EnvEndpoint, "http://127.0.0.1:1") // none wins over an endpoint
		if env[0] == "" {
			t.Setenv(tracing.EnvEndpoint, "")
		} else {
			t.Setenv(env[0], env[1])
		}
		tp, shutdown, err := tracing.FromEnv(t.Context())
		if err != nil || tp != nil || shutdown(t.Context()) != nil {
			t.Errorf("%s=%q: provider %v, err %v; want none, no error", env[0], env[1], tp, err)
		}
	}
}

// TestFromEnv_Endpoint: an endpoint alone turns tracing on, over
// http/protobuf by default, with the service name of OTEL_SERVICE_NAME:
// a real server receives the span at the shutdown's flush.
func TestFromEnv_Endpoint(t *testing.T) {
	got := make(chan *coltrace.ExportTraceServiceRequest, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			t.Errorf("%s %s: %d bytes, not an OTLP trace export", r.Method, r.URL.Path, len(b))
		}
		got <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	clearEnv(t)
	t.Setenv(tracing.EnvEndpoint, srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "billing-jobs")
	tp, shutdown, err := tracing.FromEnv(t.Context())
	if err != nil || tp == nil {
		t.Fatalf("provider %v, err %v; want one", tp, err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "nightly")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-got:
		rs := req.GetResourceSpans()
		if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || rs[0].GetScopeSpans()[0].GetSpans()[0].GetName() != "nightly" {
			t.Fatalf("export %v, want the span nightly", req)
		}
		var service string
		for _, a := range rs[0].GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		if service != "billing-jobs" {
			t.Errorf("service.name %q, want billing-jobs", service)
		}
	default:
		t.Fatal("the server received no export")
	}
}

// TestFromEnv_BadValues: an error names the variable and its value.
func TestFromEnv_BadValues(t *testing.T) {
	for _, c := range [][2]string{
		{tracing.EnvProtocol, "http/json"},
		{tracing.EnvTracesProtocol, "udp"},
		{tracing.EnvExporter, "zipkin"},
		{tracing.EnvResourceAttrs, "team"},
	} {
		clearEnv(t)
		t.Setenv(tracing.EnvEndpoint, "http://127.0.0.1:4318")
		t.Setenv(c[0], c[1])
		tp, _, err := tracing.FromEnv(t.Context())
		if err == nil || tp != nil || !strings.Contains(err.Error(), c[0]) || !strings.Contains(err.Error(), `"`+c[1]+`"`) {
			t.Errorf("%s=%s: provider %v, err %v; want an error naming both", c[0], c[1], tp, err)
		}
	}
	clearEnv(t)
	t.Setenv(tracing.EnvExporter, "otlp")
	t.Setenv(tracing.EnvProtocol, "grpc")
	tp, shutdown, err := tracing.FromEnv(t.Context())
	if err != nil || tp == nil {
		t.Fatalf("otlp over grpc: provider %v, err %v", tp, err)
	}
	_ = shutdown(t.Context())
}
