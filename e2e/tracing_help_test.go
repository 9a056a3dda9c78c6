package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/internal/httpjob"
	"github.com/batonhq/baton/internal/oteltest"
	"github.com/batonhq/baton/ledger"
)

// traceElection is the election of TestTracing's sidecars.
const traceElection = "trace"

// traceRequest is one request the traced service received.
type traceRequest struct {
	instance, traceparent string
	tick                  time.Time
	token                 uint64
	span                  trace.SpanContext // the service's own span
}

// traceService is the HTTP job's service: a Go server in the test
// process that continues the trace of each request it gets with a span
// of its own, exported synchronously to the collector, and keeps the raw
// traceparent of each request.
type traceService struct {
	srv *httptest.Server
	tp  *sdktrace.TracerProvider
	mu  sync.Mutex
	got []traceRequest
}

// startTraceService starts the service, exporting to col over OTLP/HTTP;
// it is stopped when t ends.
func startTraceService(t *testing.T, col *oteltest.Collector) *traceService {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(col.HTTPEndpoint()+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	s := &traceService{tp: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "trace-e2e-service"))))}
	tracer := s.tp.Tracer("github.com/batonhq/baton/e2e")
	prop := propagation.TraceContext{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		_, span := tracer.Start(ctx, "service "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer))
		req := traceRequest{instance: r.Header.Get(httpjob.HeaderInstance), traceparent: r.Header.Get("traceparent"), span: span.SpanContext()}
		req.tick, _ = time.Parse(time.RFC3339Nano, r.Header.Get(httpjob.HeaderTick))
		req.token, _ = strconv.ParseUint(r.Header.Get(httpjob.HeaderToken), 10, 64)
		span.End() // exported before the answer: WithSyncer
		s.mu.Lock()
		s.got = append(s.got, req)
		s.mu.Unlock()
	}))
	t.Cleanup(func() {
		s.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.tp.Shutdown(ctx)
	})
	return s
}

func (s *traceService) requests() []traceRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]traceRequest(nil), s.got...)
}

// traceNode is one `baton run` sidecar of TestTracing.
type traceNode struct {
	cutNode
	service string // its OTEL_SERVICE_NAME; "" for no tracing
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited
}

// kill sends sig to n and, for SIGKILL and SIGTERM, waits up to d for
// it to exit; it reports whether it did.
func (n *traceNode) signal(sig syscall.Signal, d time.Duration) bool {
	_ = n.cmd.Process.Signal(sig)
	select {
	case <-n.done:
		return true
	case <-time.After(d):
		return false
	}
}

// traceCluster is TestTracing's processes: two sidecars that campaign,
// each exporting to the collector (node-1 over gRPC, node-2 over
// OTLP/HTTP), and a standby one, not traced, that reads the ledger and
// the accounting once the others have stopped.
type traceCluster struct {
	dir, cmdPath string
	nodes        [3]*traceNode
}

// startTraceCluster starts the backend name and the three sidecars with
// the jobs "ping" (an HTTP request to svc every second; a failover's
// ticks caught up by one run) and "slow" (a command every second that
// writes its TRACEPARENT and works 2.5 s: overlap skips).
func startTraceCluster(t *testing.T, name string, col *oteltest.Collector, svc *traceService) *traceCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "baton-e2e-tracing-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("BATON_E2E_KEEP") == "1" {
			fmt.Printf("e2e tracing %s: artifacts kept in %s (spans in %s)\n", name, dir, col.Path())
			return
		}
		os.RemoveAll(dir)
	})
	be := startBackend(t, name, dir)
	c := &traceCluster{dir: dir, cmdPath: filepath.Join(dir, "command.log")}
	for i := range c.nodes {
		n := &traceNode{cutNode: cutNode{id: fmt.Sprintf("node-%d", i+1), http: freeLocalAddr(t)}, done: make(chan struct{})}
		var env []string
		switch i {
		case 0:
			env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.GRPCEndpoint(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}
		case 1:
			env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.HTTPEndpoint(), "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}
		}
		if env != nil {
			n.service = "baton-" + n.id
			// A short batch delay: a SIGKILL loses only the spans of the
			// last 200 ms.
			env = append(env, "OTEL_SERVICE_NAME="+n.service, "OTEL_BSP_SCHEDULE_DELAY=200")
		}
		var b strings.Builder
		fmt.Fprintf(&b, "election:\n  name: %s\n  ttl: %v\n  retry_period: 500ms\n  shutdown_timeout: 5s\n  release_timeout: 3s\n", traceElection, be.ttl)
		if be.poll > 0 {
			fmt.Fprintf(&b, "  poll_interval: %v\n", be.poll)
		}
		b.WriteString("backend:\n")
		args := be.args(be.targetsOf(i))
		for k := 0; k+1 < len(args); k += 2 {
			key := strings.ReplaceAll(strings.TrimPrefix(args[k], "--"), "-", "_")
			if key == "backend" {
				key = "kind"
			}
			fmt.Fprintf(&b, "  %s: %s\n", key, strconv.Quote(args[k+1]))
		}
		fmt.Fprintf(&b, "node:\n  http: %s\n  log_format: json\n  log_level: debug\n", n.http)
		fmt.Fprintf(&b, `jobs:
  - name: ping
    schedule: "* * * * * *"
    http: {url: "%s/ping"}
    misfire: run-once
    misfire_grace: 30s
  - name: slow
    schedule: "* * * * * *"
    overlap: skip
    command: |
      printf '%%s %%s %%s %%s\n' "$BATON_TICK" "$BATON_TOKEN" "$BATON_INSTANCE" "$TRACEPARENT" >> '%s'
      sleep 2.5
`, svc.srv.URL, c.cmdPath)
		cfg := filepath.Join(dir, n.id+".yaml")
		if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		c.startNode(t, n, cfg, env, i == 2)
		c.nodes[i] = n
	}
	return c
}

// startNode starts n's sidecar with the OTEL_* variables env only (the
// test's own are not passed on), its log in c.dir; what is still running
// when t ends is killed.
func (c *traceCluster) startNode(t *testing.T, n *traceNode, cfg string, env []string, standby bool) {
	t.Helper()
	f, err := os.Create(filepath.Join(c.dir, n.id+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	args := []string{"run", "--config", cfg, "--id", n.id}
	if standby {
		args = append(args, "--standby")
	}
	n.cmd = exec.Command(batonBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			n.cmd.Env = append(n.cmd.Env, kv)
		}
	}
	n.cmd.Env = append(n.cmd.Env, env...)
	n.cmd.Stdout, n.cmd.Stderr, n.cmd.Dir = f, f, c.dir
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); close(n.done) }() // waited for by the cleanup
	t.Cleanup(func() {
		if !n.signal(syscall.SIGTERM, 20*time.Second) {
			n.signal(syscall.SIGKILL, time.Minute)
		}
	})
}

// leader waits up to d for exactly one of the campaigning nodes to lead
// and returns its index.
func (c *traceCluster) leader(t *testing.T, d time.Duration) int {
	t.Helper()
	l := -1
	if !waitFor(d, func() bool {
		l = -1
		for i, n := range c.nodes[:2] {
			if s, err := n.status(0); err == nil && s.Leading {
				if l >= 0 {
					return false
				}
				l = i
			}
		}
		return l >= 0
	}) {
		t.Fatalf("no single leader in %v; logs in %s", d, c.dir)
	}
	return l
}

// history returns the ledger's entries of every job as n reads them: up
// to 50 a job, newest first.
func (c *traceCluster) history(t *testing.T, n *traceNode) map[string][]ledger.Run {
	t.Helper()
	var s *cutStatus
	var err error
	if !waitFor(30*time.Second, func() bool { s, err = n.status(50); return err == nil }) {
		t.Fatalf("%s: GET /status: %v", n.id, err)
	}
	out := map[string][]ledger.Run{}
	for _, j := range s.Jobs {
		out[j.Name] = j.History
	}
	return out
}

// audit returns n's GET /audit of the last hour, by job.
func (c *traceCluster) audit(t *testing.T, n *traceNode) map[string]audit.Report {
	t.Helper()
	var body struct {
		Reports []audit.Report `json:"reports"`
	}
	var last error
	if !waitFor(30*time.Second, func() bool {
		cl := http.Client{Timeout: 10 * time.Second}
		resp, err := cl.Get(fmt.Sprintf("http://%s/audit?window=1h", n.http))
		if err != nil {
			last = err
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("GET /audit: %s", resp.Status)
			return false
		}
		last = json.NewDecoder(resp.Body).Decode(&body)
		return last == nil
	}) {
		t.Fatalf("%s: %v", n.id, last)
	}
	out := map[string]audit.Report{}
	for _, r := range body.Reports {
		out[r.Job] = r
	}
	return out
}

// rangeOf returns the range of rep's not-ok ticks that holds tick.
func rangeOf(rep audit.Report, tick time.Time) (audit.Range, bool) {
	for _, r := range rep.NotOK {
		if !tick.Before(r.First) && !tick.After(r.Last) {
			return r, true
		}
	}
	return audit.Range{}, false
}

// spanTick is a span's baton.tick, parsed; zero if it has none.
func spanTick(s oteltest.Span) time.Time {
	v, _ := s.Attributes["baton.tick"].(string)
	tick, _ := time.Parse(time.RFC3339Nano, v)
	return tick
}

func spanStr(s oteltest.Span, key string) string { v, _ := s.Attributes[key].(string); return v }

// spanKey names a run: its job and its tick.
type spanKey struct {
	job  string
	tick int64 // UnixNano
}

func keyOf(job string, tick time.Time) spanKey { return spanKey{job, tick.UnixNano()} }

// parseTraceParent splits a W3C traceparent into its trace and parent
// span ids; ok is false if it is not one.
func parseTraceParent(tp string) (traceID, spanID string, ok bool) {
	f := strings.Split(tp, "-")
	if len(f) != 4 || f[0] != "00" || len(f[1]) != 32 || len(f[2]) != 16 || len(f[3]) != 2 {
		return "", "", false
	}
	return f[1], f[2], true
}

// countRequests is how many requests of instance the service got.
func (c *traceCluster) countRequests(svc *traceService, instance string) int {
	n := 0
	for _, r := range svc.requests() {
		if r.instance == instance {
			n++
		}
	}
	return n
}

// commandRecords reads the lines "slow" wrote: tick, token, instance and
// TRACEPARENT.
func (c *traceCluster) commandRecords() []traceRequest {
	var out []traceRequest
	for _, line := range readLines(c.cmdPath) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		r := traceRequest{instance: f[2]}
		r.tick, _ = time.Parse(time.RFC3339Nano, f[0])
		r.token, _ = strconv.ParseUint(f[1], 10, 64)
		if len(f) > 3 {
			r.traceparent = f[3]
		}
		out = append(out, r)
	}
	return out
}

// commandLines are the records of instance.
func (c *traceCluster) commandLines(instance string) []traceRequest {
	var out []traceRequest
	for _, r := range c.commandRecords() {
		if r.instance == instance {
			out = append(out, r)
		}
	}
	return out
}
