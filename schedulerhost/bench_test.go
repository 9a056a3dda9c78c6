package schedulerhost

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
)

// BenchmarkFireAll_SameInstant starts 10,000 jobs due at one instant, the
// burst bench/'s lateness section measures, without a ledger or an
// observer and with logging off. One op is one burst; allocs/run is the
// allocations of the whole burst divided by its runs.
func BenchmarkFireAll_SameInstant(b *testing.B) { benchFireAll(b, nil) }

// BenchmarkFireAll_SameInstant_Traced is the same burst with a Tracer
// that does the least one can (a context value, no SDK): the cost of the
// hook itself. The SDK's own cost per run is package tracing's
// BenchmarkStartRun.
func BenchmarkFireAll_SameInstant_Traced(b *testing.B) { benchFireAll(b, leastTracer{}) }

type leastTracer struct{}

type leastKey struct{}

func (leastTracer) StartRun(ctx context.Context, s RunSpan) (context.Context, func(RunEnd)) {
	return context.WithValue(ctx, leastKey{}, s.Job), func(RunEnd) {}
}
func (leastTracer) TraceID(context.Context) string { return "" }
func (leastTracer) TickNotRun(NotRun)              {}

func benchFireAll(b *testing.B, tr Tracer) {
	const jobs = 10000
	var wg sync.WaitGroup
	js := make([]Job, jobs)
	for i := range js {
		js[i] = Job{Name: fmt.Sprintf("job-%d", i), Schedule: "* * * * * *", Overlap: OverlapAllow,
			Run: func(context.Context) error { wg.Done(); return nil }}
	}
	h, err := New(Config{Jobs: js, Tracer: tr, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	t, _ := h.newTerm(context.Background(), election.NewTerm(context.Background(), 1))
	t.open()
	defer t.close()
	due := make([]dueTick, jobs)
	tick := time.Now().Truncate(time.Second)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		tick = tick.Add(time.Second)
		for k, j := range h.jobs {
			due[k] = dueTick{j, tick}
		}
		wg.Add(jobs)
		t.fireAll(due)
		wg.Wait()
		for t.inflight.Load() > 0 { // the runs record after their function returns
			runtime.Gosched()
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*jobs), "allocs/run")
}
