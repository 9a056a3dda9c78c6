package schedulerhost_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// tickCounts counts each job's runs by tick.
type tickCounts struct {
	mu   sync.Mutex
	runs map[string]map[time.Time]int
}

func (c *tickCounts) job(ctx context.Context) error {
	tk, _ := schedulerhost.TickFromContext(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]map[time.Time]int{}
	}
	if c.runs[tk.Job] == nil {
		c.runs[tk.Job] = map[time.Time]int{}
	}
	c.runs[tk.Job][tk.Time]++
	return nil
}

// check fails t unless every job ran each of its ticks once, and returns
// how many ticks each job ran (the fewest).
func (c *tickCounts) check(t *testing.T, jobs []string) (fewest int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	fewest = -1
	for _, j := range jobs {
		for tick, n := range c.runs[j] {
			if n != 1 {
				t.Errorf("job %s ran tick %v %d times", j, tick, n)
			}
		}
		if n := len(c.runs[j]); fewest < 0 || n < fewest {
			fewest = n
		}
	}
	return fewest
}

func sameInstantJobs(n int, overlap schedulerhost.Overlap, run func(context.Context) error) ([]schedulerhost.Job, []string) {
	jobs := make([]schedulerhost.Job, n)
	names := make([]string, n)
	for i := range jobs {
		names[i] = fmt.Sprintf("job-%04d", i)
		jobs[i] = schedulerhost.Job{Name: names[i], Schedule: "@every 1s", Overlap: overlap, Misfire: schedulerhost.MisfireRunOnce,
			MisfireGrace: time.Minute, Run: run}
	}
	return jobs, names
}

// The ticks due at one instant are claimed in ceil(N/MaxBatch) ledger
// calls, not one per tick, and each runs once.
func TestHost_ClaimsOfAnInstantShareBatches(t *testing.T) {
	for _, overlap := range []schedulerhost.Overlap{schedulerhost.OverlapSkip, schedulerhost.OverlapAllow} {
		t.Run(string(overlap), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n, instants = 1000, 3
				m := newMemory()
				var c tickCounts
				jobs, names := sameInstantJobs(n, overlap, c.job)
				a := startNode(t, m, "a", schedulerhost.Config{Jobs: jobs})
				before := m.ClaimCalls()
				time.Sleep(instants*time.Second + 500*time.Millisecond)
				calls := m.ClaimCalls() - before
				a.stop(t)
				if ran := c.check(t, names); ran != instants {
					t.Errorf("each job ran %d ticks, want %d", ran, instants)
				}
				limit := m.Ledger().MaxBatch()
				if want := instants * ((n + limit - 1) / limit); calls != want {
					t.Errorf("%d jobs due at each of %d instants took %d claim calls, want %d (MaxBatch %d)", n, instants, calls, want, limit)
				}
				for _, job := range []string{names[0], names[n-1]} {
					runs, err := m.Ledger().History(context.Background(), job, 10)
					if err != nil {
						t.Fatal(err)
					}
					if len(runs) != instants {
						t.Errorf("history of %s holds %d runs, want %d", job, len(runs), instants)
					}
					for _, r := range runs {
						if r.Result != ledger.ResultOK {
							t.Errorf("history of %s: tick %v is %q, want ok (finished in a batch before the drain ended)", job, r.Tick, r.Result)
						}
					}
				}
			})
		})
	}
}

// After a crash failover, the new leader reads every job's last claimed
// tick a page at a time and claims the catch-up runs of all jobs in shared
// batches.
func TestHost_CatchUpClaimsShareBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 500
		m := memory.New(election.Timing{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: 5 * time.Second})
		var c tickCounts
		jobs, names := sameInstantJobs(n, schedulerhost.OverlapSkip, c.job)
		a := startNode(t, m, "a", schedulerhost.Config{Jobs: jobs})
		time.Sleep(2500 * time.Millisecond)
		a.backend.Cut() // a crashes: no renewal, no release
		b := startNode(t, m, "b", schedulerhost.Config{Jobs: jobs})
		for { // a's term ends at its local deadline, b's starts at the lease's expiry
			if _, ok := a.elector.Term(); !ok {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		calls := m.ClaimCalls()
		for {
			if _, ok := b.elector.Term(); ok {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait() // b's catch-up claims are decided; its first regular tick is a second away
		limit := m.Ledger().MaxBatch()
		if got, want := m.ClaimCalls()-calls, (n+limit-1)/limit; got != want {
			t.Errorf("catch-up of %d jobs took %d claim calls, want %d (MaxBatch %d)", n, got, want, limit)
		}
		a.stop(t)
		b.stop(t)
		c.check(t, names)
	})
}
