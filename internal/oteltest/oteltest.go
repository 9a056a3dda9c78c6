// Package oteltest runs a real OpenTelemetry Collector for tests and
// reads back what it received. Start runs <repo>/.bin/otelcol (built by
// tools/otelcol/build.sh: the collector's OTLP receiver and the contrib
// file exporter) on loopback ports, with a traces pipeline that writes
// each batch it receives as a line of OTLP JSON to a file in a temporary
// directory; Spans and WaitFor parse that file into flat Span values.
//
// The binary is found in this order: $OTELCOL_BIN, <repo>/.bin/otelcol.
// Without one Start skips the test loudly, or fails it under
// BATON_TEST_REQUIRE=1. A stock collector on $PATH is not looked for: the
// core distribution has no file exporter.
//
// The file exporter buffers its writes and flushes them every
// FlushInterval, so a span is in the file within about that long after
// the collector acknowledged the export (the receiver hands a batch to
// the exporter before it answers; there is no batch processor).
package oteltest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/envtest"
)

const (
	// FlushInterval is the file exporter's flush_interval: how long a
	// batch the collector acknowledged may sit in its buffer before it
	// is in the file.
	FlushInterval = 10 * time.Millisecond
	// ReadyTimeout bounds how long Start waits for the collector to
	// report both endpoints and accept connections on them.
	ReadyTimeout = 30 * time.Second
	// stopGrace is how long the cleanup waits after SIGTERM before it
	// sends SIGKILL.
	stopGrace = 10 * time.Second
)

// ErrNoBinary is what Start skips (or fails) with when no collector
// binary is found.
var ErrNoBinary = errors.New("oteltest: no otelcol binary (set OTELCOL_BIN, or run tools/otelcol/build.sh or make tools)")

// Collector is a running collector process. Its methods are safe for
// concurrent use.
type Collector struct {
	grpcAddr string // host:port
	httpAddr string // host:port
	path     string // the file exporter's output
	dir      string
	stderr   *lineLog
	exited   chan struct{} // closed once the process has exited
	err      error         // the process's exit; read after exited is closed
}

// Binary returns the path of the collector binary: $OTELCOL_BIN, or
// <repo>/.bin/otelcol. The error wraps ErrNoBinary when there is none.
func Binary() (string, error) {
	if p := os.Getenv("OTELCOL_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: OTELCOL_BIN: %v", ErrNoBinary, err)
		}
		return p, nil
	}
	if root := repoRoot(); root != "" {
		p := filepath.Join(root, ".bin", "otelcol")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", ErrNoBinary
}

// Start runs a collector for t and stops it in t.Cleanup (SIGTERM, then
// SIGKILL after 10 s), logging its stderr if t failed. It returns once
// the collector said it is ready and both endpoints accept connections.
// Without a binary it skips t loudly, or fails it under
// BATON_TEST_REQUIRE=1; a collector that does not start fails t.
func Start(t testing.TB) *Collector {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		envtest.Unavailable(t, "%v", err)
		return nil // Unavailable ends t; a TB that does not lands here
	}
	c := &Collector{dir: t.TempDir(), stderr: &lineLog{}, exited: make(chan struct{})}
	c.path = filepath.Join(c.dir, "traces.jsonl")
	cfg := filepath.Join(c.dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(config(c.path)), 0o644); err != nil {
		t.Fatalf("oteltest: %v", err)
	}
	cmd := exec.Command(bin, "--config=file:"+cfg)
	cmd.Dir = c.dir
	cmd.Stderr = c.stderr // exec copies it; Wait returns once the copy is done
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("oteltest: start %s: %v", bin, err)
	}
	go func() { // owned by c: the cleanup waits for it
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		envtest.Terminate(cmd.Process, c.exited, stopGrace)
		if t.Failed() {
			t.Logf("otelcol stderr:\n%s", c.Stderr())
		}
	})
	if err := c.waitReady(ReadyTimeout); err != nil {
		t.Fatalf("oteltest: collector not ready: %v\nstderr:\n%s", err, c.Stderr())
	}
	return c
}

// config is the collector's configuration: the OTLP receiver on
// kernel-chosen loopback ports (the collector logs the ones it bound),
// the file exporter writing OTLP JSON lines to path, one traces
// pipeline, and the collector's own telemetry quiet: logs as JSON on
// stderr, no metrics (whose default is a server on :8888).
func config(path string) string {
	return `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
      http:
        endpoint: 127.0.0.1:0
exporters:
  file:
    path: ` + strconv.Quote(path) + `
    format: json
    flush_interval: ` + FlushInterval.String() + `
service:
  telemetry:
    logs:
      encoding: json
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`
}

// waitReady waits until the collector has logged both endpoints and that
// it is ready, and both accept a connection.
func (c *Collector) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for {
		grpcAddr, httpAddr, ready := c.stderr.endpoints()
		if ready && grpcAddr != "" && httpAddr != "" {
			c.grpcAddr, c.httpAddr = grpcAddr, httpAddr
			break
		}
		select {
		case <-c.exited:
			return fmt.Errorf("otelcol exited: %v", c.err)
		case <-ctx.Done():
			return fmt.Errorf("no ready message with both endpoints in %v", timeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
	var d net.Dialer
	for _, addr := range []string{c.grpcAddr, c.httpAddr} {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		conn.Close()
	}
	return nil
}

// GRPCEndpoint is the OTLP/gRPC receiver's address, "127.0.0.1:port"
// (otlptracegrpc.WithEndpoint, with WithInsecure).
func (c *Collector) GRPCEndpoint() string { return c.grpcAddr }

// HTTPEndpoint is the OTLP/HTTP receiver's base URL,
// "http://127.0.0.1:port"; traces go to its /v1/traces
// (otlptracehttp.WithEndpointURL(c.HTTPEndpoint()+"/v1/traces")).
func (c *Collector) HTTPEndpoint() string { return "http://" + c.httpAddr }

// Path is the file the collector's file exporter writes.
func (c *Collector) Path() string { return c.path }

// Stderr is what the collector wrote to stderr so far: its log, as JSON
// lines.
func (c *Collector) Stderr() string { return c.stderr.String() }

// Spans parses what the file exporter has written so far, in the order
// written. A line still being written (no newline yet) is left for the
// next call.
func (c *Collector) Spans() ([]Span, error) {
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	return parse(b)
}

// WaitSpans waits until the file holds at least n spans and returns them
// all; it fails t after timeout.
func (c *Collector) WaitSpans(t testing.TB, n int, timeout time.Duration) []Span {
	t.Helper()
	return c.WaitFor(t, func(s []Span) bool { return len(s) >= n }, timeout)
}

// WaitFor polls the file until done returns true of the spans in it, and
// returns them. It fails t if timeout passes first, if the file cannot be
// read or parsed, or if the collector exits.
func (c *Collector) WaitFor(t testing.TB, done func([]Span) bool, timeout time.Duration) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans, err := c.Spans()
		if err != nil {
			t.Fatalf("oteltest: %v", err)
		}
		if done(spans) {
			return spans
		}
		select {
		case <-c.exited:
			t.Fatalf("oteltest: otelcol exited (%v) with %d spans written:\n%s", c.err, len(spans), c.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("oteltest: after %v the file holds %d spans, not what the test waits for: %s", timeout, len(spans), summary(spans))
		}
		time.Sleep(FlushInterval)
	}
}

// summary names each span briefly, for a failure message.
func summary(spans []Span) string {
	parts := make([]string, 0, len(spans))
	for _, s := range spans {
		parts = append(parts, fmt.Sprintf("%s (%s/%s)", s.Name, s.TraceID, s.SpanID))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// lineLog keeps the collector's stderr and notes, from its JSON log
// lines, the endpoints the OTLP receiver bound and whether the service
// said it is ready.
type lineLog struct {
	mu       sync.Mutex
	all      bytes.Buffer
	partial  []byte
	grpcAddr string
	httpAddr string
	ready    bool
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(l.partial[:i])
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

// line reads one log line: "Starting GRPC server" and "Starting HTTP
// server" carry the bound endpoint; "Everything is ready" follows once
// every component started.
func (l *lineLog) line(b []byte) {
	var e struct {
		Msg      string `json:"msg"`
		Endpoint string `json:"endpoint"`
	}
	if json.Unmarshal(b, &e) != nil {
		return
	}
	switch {
	case e.Msg == "Starting GRPC server":
		l.grpcAddr = e.Endpoint
	case e.Msg == "Starting HTTP server":
		l.httpAddr = e.Endpoint
	case strings.HasPrefix(e.Msg, "Everything is ready"):
		l.ready = true
	}
}

func (l *lineLog) endpoints() (grpcAddr, httpAddr string, ready bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grpcAddr, l.httpAddr, l.ready
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}

// repoRoot finds the root of the baton module: up from the working
// directory, then up from this source file.
func repoRoot() string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			f, err := os.Open(filepath.Join(dir, "go.mod"))
			if err == nil {
				s := bufio.NewScanner(f)
				first := s.Scan() && strings.TrimSpace(s.Text()) == "module github.com/batonhq/baton"
				f.Close()
				if first {
					return dir
				}
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return ""
}
