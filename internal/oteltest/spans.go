package oteltest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Span is one span as the collector received it, flattened out of the
// OTLP resource and scope that carried it.
type Span struct {
	TraceID      string // 32 lower-case hex digits
	SpanID       string // 16 lower-case hex digits
	ParentSpanID string // 16 hex digits; empty for a root span
	Name         string
	Kind         SpanKind
	StartTime    time.Time
	EndTime      time.Time
	// Attributes holds each value as string, int64, float64, bool,
	// []byte, []any (an array) or map[string]any (a key-value list).
	Attributes map[string]any
	Events     []Event
	Status     Status
	// Resource is the attributes of the span's resource (service.name
	// and the like), typed as Attributes is.
	Resource map[string]any
	// Scope is the name of the instrumentation scope (the tracer's name)
	// and ScopeVersion its version.
	Scope        string
	ScopeVersion string
}

// Event is a span event.
type Event struct {
	Name       string
	Time       time.Time
	Attributes map[string]any
}

// Status is a span's status.
type Status struct {
	Code    StatusCode
	Message string
}

// StatusCode is OTLP's status code: Unset, OK or Error.
type StatusCode int

// The status codes, as OTLP numbers them.
const (
	StatusUnset StatusCode = 0
	StatusOK    StatusCode = 1
	StatusError StatusCode = 2
)

func (c StatusCode) String() string {
	switch c {
	case StatusUnset:
		return "Unset"
	case StatusOK:
		return "Ok"
	case StatusError:
		return "Error"
	}
	return "StatusCode(" + strconv.Itoa(int(c)) + ")"
}

// SpanKind is OTLP's span kind, numbered as OTLP numbers it.
type SpanKind int

// The span kinds.
const (
	KindUnspecified SpanKind = iota
	KindInternal
	KindServer
	KindClient
	KindProducer
	KindConsumer
)

func (k SpanKind) String() string {
	names := []string{"Unspecified", "Internal", "Server", "Client", "Producer", "Consumer"}
	if k >= 0 && int(k) < len(names) {
		return names[k]
	}
	return "SpanKind(" + strconv.Itoa(int(k)) + ")"
}

// The OTLP JSON encoding (one TracesData message a line), as far as Span
// needs it. Fixed 64-bit fields (times, int values) are strings in it.
type (
	tracesData struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []keyValue `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Scope struct {
					Name    string `json:"name"`
					Version string `json:"version"`
				} `json:"scope"`
				Spans []jsonSpan `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	jsonSpan struct {
		TraceID      string     `json:"traceId"`
		SpanID       string     `json:"spanId"`
		ParentSpanID string     `json:"parentSpanId"`
		Name         string     `json:"name"`
		Kind         SpanKind   `json:"kind"`
		Start        jsonUint64 `json:"startTimeUnixNano"`
		End          jsonUint64 `json:"endTimeUnixNano"`
		Attributes   []keyValue `json:"attributes"`
		Events       []struct {
			Time       jsonUint64 `json:"timeUnixNano"`
			Name       string     `json:"name"`
			Attributes []keyValue `json:"attributes"`
		} `json:"events"`
		Status struct {
			Code    StatusCode `json:"code"`
			Message string     `json:"message"`
		} `json:"status"`
	}
	keyValue struct {
		Key   string   `json:"key"`
		Value anyValue `json:"value"`
	}
	anyValue struct {
		String *string     `json:"stringValue"`
		Int    *jsonInt64  `json:"intValue"`
		Double *float64    `json:"doubleValue"`
		Bool   *bool       `json:"boolValue"`
		Bytes  *string     `json:"bytesValue"`
		Array  *arrayValue `json:"arrayValue"`
		KVList *kvList     `json:"kvlistValue"`
	}
	arrayValue struct {
		Values []anyValue `json:"values"`
	}
	kvList struct {
		Values []keyValue `json:"values"`
	}
)

// jsonUint64 and jsonInt64 accept a 64-bit integer as a JSON string (as
// OTLP JSON writes them) or as a number.
type (
	jsonUint64 uint64
	jsonInt64  int64
)

func (u *jsonUint64) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseUint(string(bytes.Trim(b, `"`)), 10, 64)
	*u = jsonUint64(v)
	return err
}

func (i *jsonInt64) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseInt(string(bytes.Trim(b, `"`)), 10, 64)
	*i = jsonInt64(v)
	return err
}

// parse reads OTLP JSON lines (each a TracesData message) into spans, in
// the order written. Blank lines are skipped.
func parse(b []byte) ([]Span, error) {
	var spans []Span
	for n, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var td tracesData
		if err := json.Unmarshal(line, &td); err != nil {
			return nil, fmt.Errorf("oteltest: line %d of the file: %w", n+1, err)
		}
		for _, rs := range td.ResourceSpans {
			res, err := attributes(rs.Resource.Attributes)
			if err != nil {
				return nil, fmt.Errorf("oteltest: line %d: resource: %w", n+1, err)
			}
			for _, ss := range rs.ScopeSpans {
				for _, js := range ss.Spans {
					s, err := js.span()
					if err != nil {
						return nil, fmt.Errorf("oteltest: line %d: span %q: %w", n+1, js.Name, err)
					}
					s.Resource, s.Scope, s.ScopeVersion = res, ss.Scope.Name, ss.Scope.Version
					spans = append(spans, s)
				}
			}
		}
	}
	return spans, nil
}

func (js jsonSpan) span() (Span, error) {
	attrs, err := attributes(js.Attributes)
	if err != nil {
		return Span{}, err
	}
	s := Span{
		TraceID: js.TraceID, SpanID: js.SpanID, ParentSpanID: js.ParentSpanID,
		Name: js.Name, Kind: js.Kind,
		StartTime: unixNano(js.Start), EndTime: unixNano(js.End),
		Attributes: attrs,
		Status:     Status{Code: js.Status.Code, Message: js.Status.Message},
	}
	for _, je := range js.Events {
		ea, err := attributes(je.Attributes)
		if err != nil {
			return Span{}, fmt.Errorf("event %q: %w", je.Name, err)
		}
		s.Events = append(s.Events, Event{Name: je.Name, Time: unixNano(je.Time), Attributes: ea})
	}
	return s, nil
}

func unixNano(n jsonUint64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n))
}

// attributes turns OTLP key-values into a map; nil when there are none.
func attributes(kvs []keyValue) (map[string]any, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v, err := kv.Value.value()
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", kv.Key, err)
		}
		m[kv.Key] = v
	}
	return m, nil
}

func (v anyValue) value() (any, error) {
	switch {
	case v.String != nil:
		return *v.String, nil
	case v.Int != nil:
		return int64(*v.Int), nil
	case v.Double != nil:
		return *v.Double, nil
	case v.Bool != nil:
		return *v.Bool, nil
	case v.Bytes != nil:
		return base64.StdEncoding.DecodeString(*v.Bytes)
	case v.Array != nil:
		out := make([]any, 0, len(v.Array.Values))
		for _, e := range v.Array.Values {
			x, err := e.value()
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case v.KVList != nil:
		m, err := attributes(v.KVList.Values)
		if m == nil && err == nil {
			m = map[string]any{}
		}
		return m, err
	}
	return nil, nil // an empty value
}
