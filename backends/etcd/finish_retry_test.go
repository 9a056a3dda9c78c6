package etcd_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// A history write (Finish) cut off from etcd is asked again once the
// network is back, so the run's entry ends "ok" instead of staying
// "running": the job cuts the leader's link to etcd as it returns, for
// longer than the write's 5 s bound.
func TestHost_FinishRetriedAfterACut(t *testing.T) {
	pfx := prefix(t)
	cli, proxy := proxied(t)
	b := newBackend(t, cli, pfx, 10*time.Second)
	var (
		once  sync.Once
		first = make(chan time.Time, 1)
	)
	h, err := schedulerhost.New(schedulerhost.Config{
		Jobs: []schedulerhost.Job{{Name: "report", Schedule: "* * * * * *", Run: func(ctx context.Context) error {
			once.Do(func() {
				tk, _ := schedulerhost.TickFromContext(ctx)
				proxy.Blackhole() // the run's Finish goes into the cut
				first <- tk.Time
			})
			return nil
		}}},
		Ledger:          b.Ledger(),
		Instance:        "i1",
		ShutdownTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: "i1"}, Election: pfx, RetryPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = e.Run(ctx, h.Lead) })
	defer func() {
		proxy.Heal()
		cancel()
		wg.Wait()
	}()
	var tick time.Time
	select {
	case tick = <-first:
	case <-time.After(20 * time.Second):
		t.Fatal("no run within 20 s")
	}
	time.Sleep(6500 * time.Millisecond) // past the write's 5 s bound: it failed
	proxy.Heal()

	reader := newBackend(t, dial(t, server(t).Addr()), pfx, 10*time.Second).Ledger()
	var got ledger.Run
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs, err := reader.History(context.Background(), "report", ledger.DefaultHistory)
		if err == nil {
			for _, r := range runs {
				if r.Tick.Equal(tick) {
					got = r
				}
			}
		}
		if got.Result == ledger.ResultOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run of tick %v: result %q 30 s after the network came back, want ok (%+v)", tick, got.Result, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
