package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/internal/oteltest"
	"github.com/batonhq/baton/ledger"
)

// killedFlushMargin is how long before its SIGKILL a run of the killed
// sidecar must have ended for its span to be in the collector: its batch
// processor sends every 200 ms (OTEL_BSP_SCHEDULE_DELAY), and what it
// held when killed is lost with it.
const killedFlushMargin = 2 * time.Second

// TestTracing exports the spans of two `baton run` sidecars to a real
// OpenTelemetry Collector across a failover, and checks the collector's
// file against the ledger, the tick accounting and what the jobs got.
// node-1 exports over OTLP/gRPC, node-2 over OTLP/HTTP, each as its own
// OTEL_SERVICE_NAME. The job "ping" sends a request every second to a
// service in the test process, which continues the request's trace with
// a span of its own (exported to the same collector) and keeps the raw
// traceparent; "slow", a command every second working 2.5 s with
// overlap skip, writes its TRACEPARENT and has its ticks skipped. The
// leader is SIGKILLed while "slow" runs; the other sidecar leads, catches
// "ping" up (run-once: one catch-up run, the other ticks covered), runs a
// few ticks and is stopped with SIGTERM, which flushes its spans. A third
// sidecar, a standby and not traced, then reads the ledger and the
// accounting. From the file: each run of the ledger has exactly one run
// span of its job, tick and token, with its result, kind and attributes
// (the killed sidecar's runs that ended within killedFlushMargin of its
// kill, or never, excepted: their spans died with it); no tick has two
// run spans; each span of a tick not run has the class and reason the
// accounting gives the tick; each request and each command's TRACEPARENT
// carries its run span's trace and span id; the service's span is that
// span's child.
func TestTracing(t *testing.T) {
	skipUnlessEnabled(t)
	eachBackend(t, "postgres", func(t *testing.T, name string) {
		col := oteltest.Start(t) // skips, or fails under BATON_TEST_REQUIRE=1, without .bin/otelcol
		svc := startTraceService(t, col)
		c := startTraceCluster(t, name, col, svc)
		began := time.Now()
		li := c.leader(t, 60*time.Second)
		lead, next := c.nodes[li], c.nodes[1-li]
		// The first leader runs a while, then dies in the middle of a run
		// of "slow" (it has just written its line and works on).
		if !waitFor(60*time.Second, func() bool {
			return c.countRequests(svc, lead.id) >= 8 && len(c.commandLines(lead.id)) >= 3
		}) {
			t.Fatalf("%s leads and has not made 8 requests and 3 commands in 60 s; logs in %s", lead.id, c.dir)
		}
		before := len(c.commandLines(lead.id))
		if !waitFor(30*time.Second, func() bool { return len(c.commandLines(lead.id)) > before }) {
			t.Fatalf("%s ran no more \"slow\" in 30 s; logs in %s", lead.id, c.dir)
		}
		killed := time.Now()
		if !lead.signal(syscall.SIGKILL, 30*time.Second) {
			t.Fatalf("%s did not die of SIGKILL in 30 s", lead.id)
		}
		if !waitFor(60*time.Second, func() bool { s, err := next.status(0); return err == nil && s.Leading }) {
			t.Fatalf("%s does not lead 60 s after %s was killed; logs in %s", next.id, lead.id, c.dir)
		}
		if !waitFor(60*time.Second, func() bool {
			return c.countRequests(svc, next.id) >= 4 && len(c.commandLines(next.id)) >= 2
		}) {
			t.Fatalf("%s, the next leader, has not made 4 requests and 2 commands in 60 s; logs in %s", next.id, c.dir)
		}
		if !next.signal(syscall.SIGTERM, 30*time.Second) {
			t.Fatalf("%s did not stop 30 s after SIGTERM; logs in %s", next.id, c.dir)
		}
		other := c.nodes[2]
		hist := c.history(t, other)
		reps := c.audit(t, other)
		exempt := func(r ledger.Run) bool {
			return r.Instance == lead.id && (r.Ended.IsZero() || r.Ended.After(killed.Add(-killedFlushMargin)) ||
				r.Result == ledger.ResultRunning || r.Result == ledger.ResultUnknown || r.Result == ledger.ResultSettling)
		}
		reqs := svc.requests()
		// The spans: every run that should have one, and each request's
		// service span.
		var spans []oteltest.Span
		waitFor(30*time.Second, func() bool {
			var err error
			if spans, err = col.Spans(); err != nil {
				t.Fatal(err)
			}
			return complete(spans, hist, reqs, exempt)
		})
		ts := splitSpans(spans)
		runs, exempted, window := checkRunSpans(t, ts, hist, exempt)
		notRun := checkNotRunSpans(t, ts, reps, hist, next.id)
		withTP := checkPropagation(t, ts, reqs, c.commandRecords(), func(job string, tick time.Time, instance string) bool {
			for _, r := range hist[job] {
				if r.Tick.Equal(tick) && r.Instance == instance {
					return exempt(r)
				}
			}
			return instance == lead.id && tick.After(killed.Add(-killedFlushMargin))
		})
		t.Logf("tracing %s: %s killed %v after start, %s led; runs %d (%d of the killed node's last %v excepted), "+
			"run spans %d (catch-up %d), ticks-not-run spans %d (%s), requests %d (with a traceparent %d, its run span's %d, service spans its children %d), "+
			"commands %d (TRACEPARENT its run span's %d); ledger window %s",
			name, lead.id, killed.Sub(began).Round(time.Second), next.id, runs, exempted, killedFlushMargin,
			len(ts.run), countKind(ts.run, "catch-up"), len(ts.notRun), notRun, len(reqs), withTP.withHeader, withTP.requests, withTP.children,
			withTP.commandsAll, withTP.commands, windowText(window))
	})
}

// traceSpans are the collector's spans, sorted: baton's run spans by
// job and tick, its spans of ticks not run, and the service's by id.
type traceSpans struct {
	run     map[spanKey][]oteltest.Span
	notRun  []oteltest.Span
	service map[string]oteltest.Span // by span id
}

func splitSpans(spans []oteltest.Span) traceSpans {
	ts := traceSpans{run: map[spanKey][]oteltest.Span{}, service: map[string]oteltest.Span{}}
	for _, s := range spans {
		switch {
		case s.Scope != "github.com/batonhq/baton":
			ts.service[s.SpanID] = s
		case s.Attributes["baton.class"] != nil:
			ts.notRun = append(ts.notRun, s)
		default:
			ts.run[keyOf(s.Name, spanTick(s))] = append(ts.run[keyOf(s.Name, spanTick(s))], s)
		}
	}
	return ts
}

// complete says whether spans hold a run span for every run of hist not
// exempt, and a service span for each request.
func complete(spans []oteltest.Span, hist map[string][]ledger.Run, reqs []traceRequest, exempt func(ledger.Run) bool) bool {
	ts := splitSpans(spans)
	for _, runs := range hist {
		for _, r := range runs {
			if !exempt(r) && len(ts.run[keyOf(r.Job, r.Tick)]) == 0 {
				return false
			}
		}
	}
	for _, q := range reqs {
		if _, ok := ts.service[q.span.SpanID().String()]; !ok {
			return false
		}
	}
	return true
}

func countKind(run map[spanKey][]oteltest.Span, kind string) int {
	n := 0
	for _, ss := range run {
		for _, s := range ss {
			if spanStr(s, "baton.run.kind") == kind {
				n++
			}
		}
	}
	return n
}

// checkRunSpans checks that each run of hist (exempt ones aside) has
// exactly one run span, with its token, result and attributes, and that
// each run span of the window the history covers is a run of it; no tick
// has two. It returns the runs checked, the runs exempted, and the
// window's start.
func checkRunSpans(t *testing.T, ts traceSpans, hist map[string][]ledger.Run, exempt func(ledger.Run) bool) (checked, exempted int, window time.Time) {
	t.Helper()
	var catchUps int
	for job, runs := range hist {
		if len(runs) == 0 {
			t.Errorf("job %s: no run in the ledger", job)
			continue
		}
		if len(runs) == 50 && (window.IsZero() || runs[len(runs)-1].Tick.After(window)) {
			window = runs[len(runs)-1].Tick // the history is cut: spans older than it are not judged
		}
		for _, r := range runs {
			if exempt(r) {
				exempted++
				continue
			}
			checked++
			ss := ts.run[keyOf(job, r.Tick)]
			if len(ss) != 1 {
				t.Errorf("%s tick %s (token %d, %s by %s): %d run spans, want 1", job, r.Tick.Format(time.TimeOnly), r.Token, r.Result, r.Instance, len(ss))
				continue
			}
			s := ss[0]
			if r.CatchUp {
				catchUps++
			}
			checkRunAttrs(t, s, r)
		}
	}
	if catchUps == 0 {
		t.Errorf("no catch-up run in the ledger: the failover's ticks were not caught up, the catch-up span not checked")
	}
	for k, ss := range ts.run {
		if len(ss) > 1 {
			var tokens []string
			for _, s := range ss {
				tokens = append(tokens, fmt.Sprint(s.Attributes["baton.token"]))
			}
			t.Errorf("%s tick %s has %d run spans, tokens %s: a tick run twice, or a span sent twice", k.job, time.Unix(0, k.tick).Format(time.TimeOnly), len(ss), strings.Join(tokens, ", "))
		}
		s := ss[0]
		if spanTick(s).Before(window) {
			continue
		}
		if !slices.ContainsFunc(hist[k.job], func(r ledger.Run) bool {
			return r.Tick.Equal(spanTick(s)) && s.Attributes["baton.token"] == int64(r.Token)
		}) {
			t.Errorf("run span %q tick %s token %v: no such run in the ledger", s.Name, spanTick(s).Format(time.TimeOnly), s.Attributes["baton.token"])
		}
	}
	return checked, exempted, window
}

// checkRunAttrs checks run span s against its ledger entry r.
func checkRunAttrs(t *testing.T, s oteltest.Span, r ledger.Run) {
	t.Helper()
	at := fmt.Sprintf("%s tick %s token %d", r.Job, r.Tick.Format(time.TimeOnly), r.Token)
	want := map[string]any{
		"baton.token": int64(r.Token), "baton.job": r.Job, "job.system": "baton", "baton.election": traceElection,
		"baton.run.kind": r.Kind(), "baton.result": string(r.Result), "baton.attempts": int64(max(r.Attempts, 1)),
	}
	for k, v := range want {
		if s.Attributes[k] != v {
			t.Errorf("%s: span attribute %s = %v (%T), want %v", at, k, s.Attributes[k], s.Attributes[k], v)
		}
	}
	if _, ok := s.Attributes["baton.lateness_s"].(float64); !ok {
		t.Errorf("%s: no baton.lateness_s: %v", at, s.Attributes)
	}
	if r.CatchUp {
		from, _ := time.Parse(time.RFC3339Nano, spanStr(s, "baton.catch_up.from"))
		to, _ := time.Parse(time.RFC3339Nano, spanStr(s, "baton.catch_up.to"))
		if from.IsZero() || from.After(r.Tick) || !to.Equal(r.Tick) {
			t.Errorf("%s: a catch-up run's span has baton.catch_up.from %q, .to %q; want its first missed tick (at or before its own), and its own",
				at, spanStr(s, "baton.catch_up.from"), spanStr(s, "baton.catch_up.to"))
		}
	}
	if got, want := s.Resource["service.name"], "baton-"+r.Instance; got != want {
		t.Errorf("%s: the span's service.name %v, want %s (the OTEL_SERVICE_NAME of the sidecar that ran it)", at, got, want)
	}
	if s.ParentSpanID != "" {
		t.Errorf("%s: the run span has a parent %s, want a root span", at, s.ParentSpanID)
	}
	if (r.Result == ledger.ResultOK) != (s.Status.Code != oteltest.StatusError) {
		t.Errorf("%s: result %s and span status %v", at, r.Result, s.Status)
	}
}

// checkNotRunSpans checks each span of a tick not run against the
// accounting (reps, by job): the range holding its tick has its class
// and reason. At least one is of the term of the next leader. It returns
// the counts by class and reason.
func checkNotRunSpans(t *testing.T, ts traceSpans, reps map[string]audit.Report, hist map[string][]ledger.Run, nextID string) string {
	t.Helper()
	nextTokens := map[int64]bool{}
	for _, runs := range hist {
		for _, r := range runs {
			if r.Instance == nextID {
				nextTokens[int64(r.Token)] = true
			}
		}
	}
	counts := map[string]int{}
	afterFailover := 0
	for _, s := range ts.notRun {
		job, class, reason := spanStr(s, "baton.job"), spanStr(s, "baton.class"), spanStr(s, "baton.reason")
		tick := spanTick(s)
		if tick.IsZero() { // the rest of a long range
			tick, _ = time.Parse(time.RFC3339Nano, spanStr(s, "baton.tick.first"))
		}
		at := fmt.Sprintf("span %q tick %s token %v", s.Name, tick.Format(time.TimeOnly), s.Attributes["baton.token"])
		counts[class+"/"+reason]++
		if s.Name != job+": "+class || class == "" || reason == "" || s.Attributes["job.system"] != "baton" ||
			s.Attributes["baton.election"] != traceElection || tick.IsZero() {
			t.Errorf("%s: attributes %v, want job, class, reason, tick, election %s, job.system baton", at, s.Attributes, traceElection)
			continue
		}
		if nextTokens[s.Attributes["baton.token"].(int64)] {
			afterFailover++
		}
		rep, ok := reps[job]
		if !ok {
			t.Errorf("%s: no accounting of job %s", at, job)
			continue
		}
		rg, ok := rangeOf(rep, tick)
		if !ok || string(rg.Class) != class || string(rg.Reason) != reason {
			t.Errorf("%s: %s/%s, but the accounting has the tick in %+v (found %v)", at, class, reason, rg, ok)
		}
	}
	if afterFailover == 0 {
		t.Errorf("no span of a tick not run in %s's term, after the failover (tokens %v)", nextID, nextTokens)
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; %d in the next leader's term", afterFailover)
}

// propagated counts what checkPropagation found.
type propagated struct {
	requests, children, commands, commandsAll int
	withHeader                                int // requests that had a traceparent at all
}

// checkPropagation checks that each request of "ping" and each command
// of "slow" carried the traceparent of its run's span (same job, tick
// and token): that span's trace id and span id; and that the service's
// span of each request is in the file as that span's child. A run whose
// span died with the killed sidecar (exempt) is not judged.
func checkPropagation(t *testing.T, ts traceSpans, reqs, cmds []traceRequest, exempt func(job string, tick time.Time, instance string) bool) propagated {
	t.Helper()
	var p propagated
	check := func(job string, q traceRequest) bool {
		at := fmt.Sprintf("%s tick %s token %d by %s", job, q.tick.Format(time.TimeOnly), q.token, q.instance)
		traceID, parent, ok := parseTraceParent(q.traceparent)
		if !ok {
			t.Errorf("%s: traceparent %q, want 00-<trace id>-<span id>-<flags>", at, q.traceparent)
			return false
		}
		var run *oteltest.Span
		for _, s := range ts.run[keyOf(job, q.tick)] {
			if s.Attributes["baton.token"] == int64(q.token) {
				run = &s
			}
		}
		switch {
		case run == nil && exempt(job, q.tick, q.instance):
			return false
		case run == nil:
			t.Errorf("%s: no run span with that token for its traceparent %s", at, q.traceparent)
			return false
		case run.TraceID != traceID || run.SpanID != parent:
			t.Errorf("%s: traceparent %s, want the run span's trace %s span %s", at, q.traceparent, run.TraceID, run.SpanID)
			return false
		}
		return true
	}
	for _, q := range reqs {
		if q.traceparent != "" {
			p.withHeader++
		}
		if !check("ping", q) {
			continue
		}
		p.requests++
		_, parent, _ := parseTraceParent(q.traceparent)
		s, ok := ts.service[q.span.SpanID().String()]
		if !ok || s.ParentSpanID != parent || s.TraceID != q.span.TraceID().String() {
			t.Errorf("ping tick %s: the service's span %s is not in the file as the child of %s (found %v: parent %q)",
				q.tick.Format(time.TimeOnly), q.span.SpanID(), parent, ok, s.ParentSpanID)
			continue
		}
		p.children++
	}
	for _, q := range cmds {
		p.commandsAll++
		if check("slow", q) {
			p.commands++
		}
	}
	return p
}

func windowText(from time.Time) string {
	if from.IsZero() {
		return "whole (under 50 runs a job)"
	}
	return "from " + from.Format(time.TimeOnly) + " (50 runs a job)"
}
