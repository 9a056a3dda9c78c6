package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/oteltest"
)

// collector is an OpenTelemetry Collector process (the repository's
// .bin/otelcol, found as the tracing tests find it) with an OTLP/HTTP
// receiver on a loopback port the kernel chose and the file exporter
// writing each batch it receives as a line of OTLP JSON.
type collector struct {
	cmd    *exec.Cmd
	dir    string
	path   string // the file exporter's output
	log    *colLog
	exited chan struct{}
	err    error // the process's exit; read after exited is closed
	url    string
}

// startCollector starts the collector and returns once it has said it
// is ready and which port its OTLP/HTTP receiver bound.
func startCollector() (*collector, error) {
	bin, err := oteltest.Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-otelcol-")
	if err != nil {
		return nil, err
	}
	c := &collector{dir: dir, path: filepath.Join(dir, "traces.jsonl"), log: &colLog{}, exited: make(chan struct{})}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(collectorConfig(c.path)), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.cmd = exec.Command(bin, "--config=file:"+cfg)
	c.cmd.Dir, c.cmd.Stderr = dir, c.log
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { // owned by c: stop waits for it
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		addr, ready := c.log.endpoint()
		if ready && addr != "" {
			c.url = "http://" + addr
			return c, nil
		}
		select {
		case <-c.exited:
			c.stop()
			return nil, fmt.Errorf("otelcol exited: %v: %s", c.err, lastLines(c.log.String(), 5))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("otelcol not ready in 30s: %s", lastLines(c.log.String(), 5))
		}
	}
}

// collectorConfig: the OTLP/HTTP receiver on a loopback port of the
// kernel's choice (the collector logs it), the file exporter to path
// (flushed every 100 ms), one traces pipeline, the collector's own
// telemetry as JSON logs and no metrics server.
func collectorConfig(path string) string {
	return `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
exporters:
  file:
    path: ` + strconv.Quote(path) + `
    format: json
    flush_interval: 100ms
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

// stop ends the collector (SIGTERM, SIGKILL after 10 s) and removes its
// directory.
func (c *collector) stop() {
	envtest.Terminate(c.cmd.Process, c.exited, 10*time.Second)
	os.RemoveAll(c.dir)
}

// spans counts the spans in the complete lines of the file so far.
func (c *collector) spans() (int, error) {
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return countSpans(b)
}

// waitSpans waits until the file holds want spans, or holds the same
// count for quiet (the exporter has flushed what it got); it returns the
// count.
func (c *collector) waitSpans(want int, quiet time.Duration) (int, error) {
	last, since := -1, time.Now()
	for {
		n, err := c.spans()
		if err != nil || n >= want {
			return n, err
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > quiet {
			return n, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countSpans counts the spans of the complete lines of b, each an OTLP
// JSON ExportTraceServiceRequest.
func countSpans(b []byte) (int, error) {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		return 0, nil
	}
	n := 0
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(make([]byte, 0, 1<<20), 1<<30)
	for s.Scan() {
		if len(bytes.TrimSpace(s.Bytes())) == 0 {
			continue
		}
		var req struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []json.RawMessage `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(s.Bytes(), &req); err != nil {
			return n, fmt.Errorf("otelcol file: %w", err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
	}
	return n, s.Err()
}

// colLog keeps the collector's stderr (JSON log lines) and notes the
// OTLP/HTTP receiver's endpoint and whether the collector is ready.
type colLog struct {
	mu      sync.Mutex
	all     bytes.Buffer
	partial []byte
	addr    string
	ready   bool
}

func (l *colLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		var e struct {
			Msg      string `json:"msg"`
			Endpoint string `json:"endpoint"`
		}
		if json.Unmarshal(l.partial[:i], &e) == nil {
			switch {
			case e.Msg == "Starting HTTP server":
				l.addr = e.Endpoint
			case strings.HasPrefix(e.Msg, "Everything is ready"):
				l.ready = true
			}
		}
		l.partial = l.partial[i+1:]
	}
}

func (l *colLog) endpoint() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr, l.ready
}

func (l *colLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
