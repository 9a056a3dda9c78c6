package tracing_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

// TestNotRun_Overlap: a tick skipped by the overlap policy is a span of
// its own with its class, reason, tick and the term's token.
func TestNotRun_Overlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t)
		m := newMemory()
		time.Sleep(300 * time.Millisecond)
		t0 := time.Now().Truncate(time.Second)
		var s seen
		stop := lead(t, m, "a", rec, schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{{Name: "slow", Schedule: "@every 1s",
			Run: func(ctx context.Context) error { s.add(ctx); time.Sleep(1500 * time.Millisecond); return nil }}}})
		time.Sleep(2500 * time.Millisecond) // ticks 1 (runs to 2.5) and 2 (skipped)
		stop()
		got := rec.spans("slow: skipped")
		if len(got) != 1 {
			t.Fatalf("%d skipped spans, want 1 (all: %v)", len(got), names(rec))
		}
		a := attrs(got[0])
		if a[tracing.AttrClass].AsString() != "skipped" || a[tracing.AttrReason].AsString() != "overlap" ||
			a[tracing.AttrTick].AsString() != stamp(t0.Add(2*time.Second)) || a[tracing.AttrToken].AsInt64() != int64(s.token) ||
			a[tracing.AttrElection].AsString() != "billing" || a[tracing.AttrJob].AsString() != "slow" {
			t.Errorf("attributes %v; want skipped, overlap, tick %s, token %d", got[0].Attributes, stamp(t0.Add(2*time.Second)), s.token)
		}
		if !got[0].StartTime.Equal(t0.Add(2 * time.Second)) {
			t.Errorf("span starts %v, want when the tick was recorded, %v", got[0].StartTime, t0.Add(2*time.Second))
		}
	})
}

func names(rec *recorder) []string {
	var out []string
	for _, s := range rec.exp.GetSpans() {
		out = append(out, s.Name)
	}
	return out
}

// gap leads for 3 s as a, nobody leads for gap, then b leads for 2 s.
func gap(t *testing.T, rec *recorder, job schedulerhost.Job, gap time.Duration) (aStop, bStart time.Time) {
	m := newMemory()
	time.Sleep(300 * time.Millisecond)
	cfg := schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{job}}
	stop := lead(t, m, "a", rec, cfg)
	time.Sleep(3 * time.Second)
	stop()
	aStop = time.Now()
	time.Sleep(gap)
	bStart = time.Now()
	stop = lead(t, m, "b", rec, cfg)
	time.Sleep(2 * time.Second)
	stop()
	return aStop, bStart
}

// TestRunSpan_CatchUp: the catch-up run after a gap says so, with the
// first and last tick it stands for; the ticks it covers are spans of
// class covered.
func TestRunSpan_CatchUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t)
		_, bStart := gap(t, rec, schedulerhost.Job{Name: "sync", Schedule: "@every 1s", Misfire: schedulerhost.MisfireRunOnce,
			MisfireGrace: time.Minute, Run: func(context.Context) error { return nil }}, 5*time.Second)
		var catchUp int
		for _, sp := range rec.spans("sync") {
			a := attrs(sp)
			if a[tracing.AttrRunKind].AsString() != "catch-up" {
				continue
			}
			catchUp++
			from, to := a[tracing.AttrCatchUpFrom].AsString(), a[tracing.AttrCatchUpTo].AsString()
			if to != a[tracing.AttrTick].AsString() || to != stamp(bStart.Truncate(time.Second)) || from == "" || from >= to {
				t.Errorf("catch-up from %q to %q, tick %v; want from a tick before to, the last missed tick %s", from, to,
					a[tracing.AttrTick].Emit(), stamp(bStart.Truncate(time.Second)))
			}
		}
		if catchUp != 1 {
			t.Errorf("%d catch-up spans, want 1 (all: %v)", catchUp, names(rec))
		}
		if n := len(rec.spans("sync: covered")); n < 3 {
			t.Errorf("%d covered spans, want the gap's ticks but the last (all: %v)", n, names(rec))
		}
	})
}

// TestNotRun_Missed: ticks missed while nobody led are spans of class
// missed; a long gap gives MaxTickSpans spans of single ticks, then one
// for the rest with its count and range.
func TestNotRun_Missed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t)
		aStop, bStart := gap(t, rec, schedulerhost.Job{Name: "poll", Schedule: "@every 1s", Misfire: schedulerhost.MisfireSkip,
			Run: func(context.Context) error { return nil }}, 2*time.Hour)
		got := rec.spans("poll: missed")
		if len(got) != tracing.MaxTickSpans+1 {
			t.Fatalf("%d missed spans, want %d", len(got), tracing.MaxTickSpans+1)
		}
		first := aStop.Truncate(time.Second).Add(time.Second)
		last := bStart.Truncate(time.Second)
		var total int64
		for i, sp := range got {
			a := attrs(sp)
			if a[tracing.AttrClass].AsString() != "missed" || a[tracing.AttrReason].AsString() != "no-leader" {
				t.Errorf("span %d: %v, want missed, no-leader", i, sp.Attributes)
			}
			if i < tracing.MaxTickSpans {
				if want := stamp(first.Add(time.Duration(i) * time.Second)); a[tracing.AttrTick].AsString() != want {
					t.Errorf("span %d: tick %v, want %s", i, a[tracing.AttrTick].Emit(), want)
				}
				total++
				continue
			}
			total += a[tracing.AttrTicks].AsInt64()
			if a[tracing.AttrTickFirst].AsString() != stamp(first.Add(tracing.MaxTickSpans*time.Second)) || a[tracing.AttrTickLast].AsString() != stamp(last) {
				t.Errorf("the rest: %v, want from the %dth tick to %s", sp.Attributes, tracing.MaxTickSpans+1, stamp(last))
			}
		}
		if want := int64(last.Sub(first)/time.Second) + 1; total != want {
			t.Errorf("the spans stand for %d ticks, want %d", total, want)
		}
	})
}
