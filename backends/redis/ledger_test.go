package redis_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/ledger"
)

// The time of one claim script call by batch size, to choose
// DefaultMaxBatch: the server runs nothing else while a script runs.
func TestClaimBatchTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	b := newBackend(t, redis.Config{Election: electionName(t), MaxBatch: redis.MaxMaxBatch, Logger: slog.New(slog.DiscardHandler)})
	l := backendtest.Acquire(t, b, "a", acquireWithin)
	defer backendtest.Release(t, l)
	led := b.Ledger()
	tick := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	round := 0
	for _, n := range []int{1, 100, 500, 1000, 5000} {
		var best time.Duration
		for r := range 5 {
			round++
			cs := make([]ledger.Claim, n)
			for i := range cs {
				at := tick.Add(time.Duration(round) * time.Second)
				cs[i] = ledger.Claim{Job: fmt.Sprintf("job-%05d", i), Tick: at, Token: l.Token(), Instance: "a", Started: at}
			}
			start := time.Now()
			for i, err := range led.Claim(ctxT(t, 10*time.Second), cs) {
				if err != nil {
					t.Fatalf("claim %d of %d: %v", i, n, err)
				}
			}
			if d := time.Since(start); r == 0 || d < best {
				best = d
			}
		}
		t.Logf("claims per script call %5d: best of 5 %v (%v per claim)", n, best.Round(10*time.Microsecond), (best / time.Duration(n)).Round(time.Microsecond))
	}
}
