package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

// traceJobs is the job count of the lateness with and without tracing.
const traceJobs = 1000

// traceRow is a ledger trial on etcd with tracing on or off.
type traceRow struct {
	on    bool
	row   ledRow
	spans int // spans the collector wrote during and after the trial
	err   error
}

// traceResults are the tracing section's figures.
type traceResults struct {
	rows  []traceRow
	began time.Time     // the section's start
	took  time.Duration // how long the section took
	load  [2]string     // the 1-minute load average at its start and end
	warm  time.Duration
	err   error // the collector did not start
}

// traceEnv are the variables the section gives tracing.FromEnv, as an
// operator gives them to baton.Main: OTLP over HTTP to the collector.
func traceEnv(url string) map[string]string {
	return map[string]string{
		tracing.EnvExporter:       "otlp",
		tracing.EnvEndpoint:       url,
		tracing.EnvProtocol:       "http/protobuf",
		"OTEL_SERVICE_NAME":       "baton-bench",
		tracing.EnvTracesEndpoint: "",
		tracing.EnvTracesProtocol: "",
	}
}

// traceProvider builds the provider tracing.FromEnv builds from the
// variables of traceEnv, and puts the process's variables back.
func traceProvider(url string) (*tracing.Tracer, tracing.Shutdown, error) {
	for k, v := range traceEnv(url) {
		old, had := os.LookupEnv(k)
		if v == "" {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, v)
		}
		if had {
			defer os.Setenv(k, old)
		} else {
			defer os.Unsetenv(k)
		}
	}
	tp, shutdown, err := tracing.FromEnv(context.Background())
	if err != nil {
		return nil, nil, err
	}
	if tp == nil {
		return nil, nil, fmt.Errorf("tracing.FromEnv: tracing off with %v", traceEnv(url))
	}
	return tracing.NewTracer(tp, "bench"), shutdown, nil
}

// traceLateness runs the same ledger trial on etcd (section 7's, no
// control store) with tracing off, on, and off again, beside one
// collector that runs through all three.
func traceLateness(e *env, o options) *traceResults {
	warm, window := 3*time.Second, 30*time.Second
	if o.quick {
		window = 6 * time.Second
	}
	t := &traceResults{began: time.Now(), load: [2]string{loadAvg()}, warm: warm}
	defer func() { t.took, t.load[1] = time.Since(t.began), loadAvg() }()
	logf("tracing: starting the collector")
	c, err := startCollector()
	if err != nil {
		t.err = err
		return t
	}
	defer c.stop()
	for _, on := range []bool{false, true, false} {
		logf("tracing: lateness on etcd, %d jobs, tracing %s", traceJobs, onOff(on))
		t.rows = append(t.rows, traceTrial(e, c, on, warm, window))
	}
	return t
}

// traceTrial is one trial: with on, a provider of its own, shut down
// (its spans flushed) after the trial, and the spans the collector
// wrote meanwhile counted.
func traceTrial(e *env, c *collector, on bool, warm, window time.Duration) traceRow {
	r := traceRow{on: on}
	before, err := c.spans()
	if err != nil {
		r.err = err
		return r
	}
	var tr schedulerhost.Tracer // nil: off, as with no provider
	shutdown := tracing.Shutdown(func(context.Context) error { return nil })
	if on {
		t, s, err := traceProvider(c.url)
		if err != nil {
			r.err = err
			return r
		}
		tr, shutdown = t, s
	}
	r.row = tracedTrial(e, "etcd", traceJobs, warm, window, noControl, tr)
	ctx, cancel := context.WithTimeout(context.Background(), tracing.FlushTimeout)
	err = shutdown(ctx)
	cancel()
	if err != nil {
		r.err = fmt.Errorf("provider shutdown: %w", err)
	}
	want := before
	if on {
		want += int(r.row.runs)
	}
	n, err := c.waitSpans(want, 2*time.Second)
	if err != nil && r.err == nil {
		r.err = err
	}
	r.spans = n - before
	if r.row.err != nil && r.err == nil {
		r.err = r.row.err
	}
	return r
}

// traceSwitch says how tracing is switched on and off.
const traceSwitch = "A program that builds a `schedulerhost.Host` switches it on with `schedulerhost.Config.Tracer: tracing.NewTracer(provider, election)` and leaves it off with a nil `Tracer` (no tracing step in a run's pipeline, nothing allocated per run); `baton.Main` and the sidecar switch it on with the standard `OTEL_*` variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_TRACES_EXPORTER=otlp`; `none`, or nothing set, is off), which `tracing.FromEnv` reads (docs/tracing.md)"

func (r *results) tracingMarkdown(w func(string, ...any)) {
	t := r.trace
	if t == nil {
		return
	}
	w("\n## 9. Tracing's cost\n\n")
	w("%s. Section 7's trial on etcd (a `schedulerhost.Host` leading with the backend's `Ledger()`, no control store, %d jobs on `* * * * * *`, through a counting proxy, %v of warm-up), run three times with the same window, in this order: tracing off, on, off again; the rows are in that order. On, the Host's `Tracer` is `tracing.NewTracer` on the provider `tracing.FromEnv` builds from `OTEL_EXPORTER_OTLP_ENDPOINT` (the SDK's `TracerProvider`, its batch span processor at the `OTEL_BSP_*` defaults, OTLP over HTTP/protobuf), exporting to a real OpenTelemetry Collector (`.bin/otelcol`: its OTLP receiver on a loopback port, its file exporter); the provider is shut down after the trial, which flushes what it holds. The collector runs through all three trials, on the same 2 cores as the bench and etcd, so its work on the spans it receives is in the row with tracing on. \"Runs\" is every run of the trial (warm-up and window), \"spans exported\" the spans the collector wrote in the file during it and at the flush. The section ran on %s for %s (the collector's start and the three trials, one after another); load average (1 minute) %s at their start, %s at their end.\n\n",
		traceSwitch, traceJobs, t.warm, t.began.UTC().Format("2006-01-02 15:04 MST"), t.took.Round(time.Second), t.load[0], t.load[1])
	if t.err != nil {
		w("Not measured: %v.\n", t.err)
		return
	}
	w("| Tracing | Jobs | window | n | p50 / p99 / max | missing | extra | runs | spans exported | RSS MB |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, l := range t.rows {
		x := l.row
		if l.err != nil {
			w("| %s | %d | %v | — | error: %v | | | | | |\n", onOff(l.on), traceJobs, x.window, l.err)
			continue
		}
		w("| %s | %d | %v | %d | %s | %d | %d | %d | %d | %.0f |\n", onOff(l.on), x.jobs, x.window, x.d.n(), x.d.triple(), x.missing, x.extra, x.runs, l.spans, x.rssMB)
	}
	if s := traceSummary(t.rows); s != "" {
		w("\n%s\n", s)
	}
}

// traceSummary is the computed sentence of the section: the spread of
// the two off rows, and on against their mean, at p50 and p99.
func traceSummary(rows []traceRow) string {
	if len(rows) != 3 || !rows[1].on || rows[0].on || rows[2].on {
		return ""
	}
	for _, l := range rows {
		if l.err != nil || l.row.d.n() == 0 {
			return ""
		}
	}
	a, on, b := rows[0].row.d, rows[1].row.d, rows[2].row.d
	abs := func(d time.Duration) time.Duration { return max(d, -d) }
	mean := func(x, y time.Duration) time.Duration { return (x + y) / 2 }
	where := func(v, x, y time.Duration) string {
		switch {
		case v < min(x, y):
			return "below both off rows'"
		case v > max(x, y):
			return "above both off rows'"
		}
		return "between the off rows'"
	}
	s := fmt.Sprintf("Off-to-off difference: %s at p50, %s at p99. On minus the mean of the two off rows: %s at p50, %s at p99 (on's p50 is %s, its p99 %s).",
		fmtDur(abs(b.p50()-a.p50())), fmtDur(abs(b.p99()-a.p99())),
		signed(on.p50()-mean(a.p50(), b.p50())), signed(on.p99()-mean(a.p99(), b.p99())),
		where(on.p50(), a.p50(), b.p50()), where(on.p99(), a.p99(), b.p99()))
	if r := rows[1]; r.row.runs > 0 {
		s += fmt.Sprintf(" With tracing on, the collector wrote %d spans of %d runs", r.spans, r.row.runs)
		if lost := r.row.runs - int64(r.spans); lost > 0 {
			s += fmt.Sprintf(": %d were not exported", lost)
		}
		s += "."
	}
	return s
}

// signed is fmtDur with a sign: "+1.20 ms", "-3.4 ms".
func signed(d time.Duration) string {
	if d > 0 {
		return "+" + fmtDur(d)
	}
	return fmtDur(d)
}
