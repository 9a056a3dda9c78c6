package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/oteltest"
	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

// TestCountSpans counts the spans of every resource and scope of each
// complete line, and leaves a line not yet ended by a newline.
func TestCountSpans(t *testing.T) {
	file := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a"},{"name":"b"}]},{"spans":[{"name":"c"}]}]},{"scopeSpans":[{"spans":[{"name":"d"}]}]}]}
{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"e"}]}]}]}
{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"f"}`
	n, err := countSpans([]byte(file))
	if err != nil || n != 5 {
		t.Fatalf("countSpans = %d, %v; want 5, nil", n, err)
	}
	if _, err := countSpans([]byte("not json\n")); err == nil {
		t.Fatal("countSpans of a line that is not JSON: no error")
	}
}

// TestCollectorReceivesEverySpan exports runs' spans through the
// section's provider to a real collector and counts them in its file;
// the process's OTEL_* variables are as they were.
func TestCollectorReceivesEverySpan(t *testing.T) {
	if _, err := oteltest.Binary(); errors.Is(err, oteltest.ErrNoBinary) {
		t.Skipf("no collector: %v", err)
	}
	c, err := startCollector()
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	t.Setenv(tracing.EnvEndpoint, "http://127.0.0.1:1") // restored by traceProvider
	tr, shutdown, err := traceProvider(c.url)
	if err != nil {
		t.Fatal(err)
	}
	if got := os.Getenv(tracing.EnvEndpoint); got != "http://127.0.0.1:1" {
		t.Errorf("%s after traceProvider: %q", tracing.EnvEndpoint, got)
	}
	const runs = 700 // more than a batch of the processor (512)
	now := time.Now()
	for i := range runs {
		_, end := tr.StartRun(context.Background(), schedulerhost.RunSpan{Job: "job", Tick: now.Add(time.Duration(i) * time.Second), Kind: schedulerhost.RunScheduled, Start: now})
		end(schedulerhost.RunEnd{Ran: true, Result: "ok", Attempts: 1, End: now})
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracing.FlushTimeout)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := c.waitSpans(runs, 3*time.Second)
	if err != nil || n != runs {
		t.Fatalf("the collector wrote %d spans (%v), want %d", n, err, runs)
	}
}

// TestTraceSummary computes the section's sentence from three rows.
func TestTraceSummary(t *testing.T) {
	ms := func(v ...float64) dist {
		var d dist
		for _, x := range v {
			d.add(time.Duration(x * float64(time.Millisecond)))
		}
		return d
	}
	rows := []traceRow{
		{on: false, row: ledRow{d: ms(10, 20)}},
		{on: true, row: ledRow{d: ms(15, 30), runs: 100}, spans: 90},
		{on: false, row: ledRow{d: ms(12, 22)}},
	}
	got := traceSummary(rows)
	for _, want := range []string{
		"Off-to-off difference: 2.00 ms at p50, 2.00 ms at p99.",
		"On minus the mean of the two off rows: +4.00 ms at p50, +9.00 ms at p99",
		"on's p50 is above both off rows', its p99 above both off rows')",
		"the collector wrote 90 spans of 100 runs: 10 were not exported.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	rows[1].row.d = ms(11, 21)
	if got := traceSummary(rows); !strings.Contains(got, "on's p50 is between the off rows', its p99 between the off rows')") {
		t.Errorf("on between the two off rows:\n%s", got)
	}
	rows[1].row.d = ms(5, 10)
	if got := traceSummary(rows); !strings.Contains(got, "-6.00 ms at p50, -11.0 ms at p99 (on's p50 is below both off rows', its p99 below both off rows')") {
		t.Errorf("on below the two off rows:\n%s", got)
	}
	if got := traceSummary(rows[:2]); got != "" {
		t.Errorf("two rows: %q, want none", got)
	}
}
