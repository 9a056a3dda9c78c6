package tracing

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The OTEL_* variables FromEnv reads itself; the exporters read the
// rest (headers, timeout, certificates, ...), the SDK the sampler
// (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG) and the batch span
// processor's (OTEL_BSP_*), the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
const (
	EnvExporter       = "OTEL_TRACES_EXPORTER"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvResourceAttrs  = "OTEL_RESOURCE_ATTRIBUTES"
)

// Shutdown flushes the spans a provider holds and stops it.
type Shutdown func(ctx context.Context) error

// FromEnv returns a TracerProvider that exports spans by OTLP as the
// standard OTEL_* variables say, or nil (and a Shutdown that does
// nothing) when they ask for no tracing: tracing is on when
// OTEL_TRACES_EXPORTER is "otlp", or an endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
// unless OTEL_TRACES_EXPORTER is "none". The protocol
// (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL)
// is "grpc" or "http/protobuf", the default. It makes no connection: the
// exporter connects when it first sends. An error names the variable and
// its value.
func FromEnv(ctx context.Context) (trace.TracerProvider, Shutdown, error) {
	none := func(context.Context) error { return nil }
	on, err := enabled()
	if err != nil || !on {
		return nil, none, err
	}
	exp, err := exporter(ctx)
	if err != nil {
		return nil, none, err
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, none, fmt.Errorf("tracing: %s %q: %w", EnvResourceAttrs, os.Getenv(EnvResourceAttrs), err)
	}
	if merged, err := resource.Merge(resource.Default(), res); err == nil {
		res = merged // the default service name (unknown_service:NAME) unless the variables give one
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// enabled says whether the variables turn tracing on.
func enabled() (bool, error) {
	switch v := strings.TrimSpace(os.Getenv(EnvExporter)); v {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
		return os.Getenv(EnvEndpoint) != "" || os.Getenv(EnvTracesEndpoint) != "", nil
	default:
		return false, fmt.Errorf("tracing: %s %q: want otlp or none", EnvExporter, v)
	}
}

// exporter returns the OTLP exporter of the protocol the variables name.
func exporter(ctx context.Context) (*otlptrace.Exporter, error) {
	name, proto := EnvTracesProtocol, os.Getenv(EnvTracesProtocol)
	if proto == "" {
		name, proto = EnvProtocol, os.Getenv(EnvProtocol)
	}
	var exp *otlptrace.Exporter
	var err error
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: %s %q: want grpc or http/protobuf", name, proto)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter (%s %q): %w", name, proto, err)
	}
	return exp, nil
}
