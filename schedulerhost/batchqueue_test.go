package schedulerhost

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Runs of one instant that keep arriving, each within maxLinger of the
// one before but all of them over more than maxLinger (10,000 goroutines
// starting on a busy machine), still share one batch: the linger counts
// from the last arrival, not from the first item's.
func TestBatchQueue_SlowArrivalsStillShareABatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var calls [][]int
		q := newBatchQueue(100, 8, func(vs []int) []error {
			mu.Lock()
			calls = append(calls, append([]int(nil), vs...))
			mu.Unlock()
			return make([]error, len(vs))
		})
		const runs = 5
		gap := maxLinger * 3 / 5 // each arrival within maxLinger of the last
		q.expectN(runs)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * gap)
				if err := q.do(i, true); err != nil {
					t.Errorf("do(%d): %v", i, err)
				}
			})
		}
		wg.Wait()
		if len(calls) != 1 || len(calls[0]) != runs {
			t.Errorf("calls %v: want one call of all %d items (arrivals %v apart, %v in all, maxLinger %v)", calls, runs, gap, time.Duration(runs-1)*gap, maxLinger)
		}
	})
}

// A run that is expected and never arrives holds the batch no longer
// than maxLinger after the last arrival.
func TestBatchQueue_MissingRunLingersBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newBatchQueue(100, 8, func(vs []int) []error { return make([]error, len(vs)) })
		q.expectN(2)
		start := time.Now()
		if err := q.do(1, true); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != maxLinger {
			t.Errorf("a batch waiting for a run that never came went after %v, want maxLinger %v", took, maxLinger)
		}
	})
}
