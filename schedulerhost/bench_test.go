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
func BenchmarkFireAll_SameInstant(b *testing.B) {
	const jobs = 10000
	var wg sync.WaitGroup
	js := make([]Job, jobs)
	for i := range js {
		js[i] = Job{Name: fmt.Sprintf("job-%d", i), Schedule: "* * * * * *", Overlap: OverlapAllow,
			Run: func(context.Context) error { wg.Done(); return nil }}
	}
	h, err := New(Config{Jobs: js, Logger: slog.New(slog.DiscardHandler)})
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
