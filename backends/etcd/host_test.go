package etcd_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/proxytest"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

type started struct {
	tick     time.Time
	instance string
	token    uint64
}

// Once per tick across a failover: two instances run an every-second job
// through schedulerhost.Host with the etcd ledger; the leader is cut off
// from etcd, the other takes over. No tick starts twice, and ticks started
// by a later term come after those of the earlier one.
func TestHost_OncePerTickAcrossNetworkCut(t *testing.T) {
	pfx := prefix(t)
	var (
		mu   sync.Mutex
		runs []started
	)
	type instance struct {
		name    string
		elector *election.Elector
		host    *schedulerhost.Host
		proxy   *proxytest.Proxy
		ledger  ledger.Ledger
	}
	mk := func(name string) instance {
		cli, p := proxied(t)
		b := newBackend(t, cli, pfx, 2*time.Second)
		lg := b.Ledger()
		h, err := schedulerhost.New(schedulerhost.Config{
			Jobs: []schedulerhost.Job{{Name: "every-second", Schedule: "* * * * * *", Run: func(ctx context.Context) error {
				tk, _ := schedulerhost.TickFromContext(ctx)
				tok, _ := election.TokenFromContext(ctx)
				mu.Lock()
				runs = append(runs, started{tk.Time, name, tok})
				mu.Unlock()
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
				}
				return nil
			}}},
			Ledger:          lg,
			Instance:        name,
			ShutdownTimeout: 2 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		e, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: name}, Election: pfx, RetryPeriod: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return instance{name, e, h, p, lg}
	}
	insts := []instance{mk("i1"), mk("i2")}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, in := range insts {
		wg.Go(func() {
			if err := in.elector.Run(ctx, in.host.Lead); err != nil {
				t.Errorf("%s: Run: %v", in.name, err)
			}
		})
	}
	leader := func() (instance, bool) {
		for _, in := range insts {
			if in.elector.IsLeader() {
				return in, true
			}
		}
		return instance{}, false
	}
	waitFor(t, 10*time.Second, "a leader", func() bool { _, ok := leader(); return ok })
	time.Sleep(3 * time.Second)
	first, _ := leader()
	first.proxy.Blackhole()
	cut := time.Now()
	waitFor(t, 10*time.Second, "the other instance to lead", func() bool {
		l, ok := leader()
		return ok && l.name != first.name
	})
	t.Logf("%s was cut off; the other instance led %v later", first.name, time.Since(cut).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	first.proxy.Heal()
	time.Sleep(time.Second)
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	seen := map[time.Time]started{}
	for _, r := range runs {
		if prev, dup := seen[r.tick]; dup {
			t.Errorf("tick %v started twice: by %s (token %d) and %s (token %d)", r.tick, prev.instance, prev.token, r.instance, r.token)
		}
		seen[r.tick] = r
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b started) int { return a.tick.Compare(b.tick) })
	tokens := map[uint64]bool{}
	for i, r := range sorted {
		tokens[r.token] = true
		if i > 0 && r.token < sorted[i-1].token {
			t.Errorf("tick %v ran with token %d after tick %v with token %d", r.tick, r.token, sorted[i-1].tick, sorted[i-1].token)
		}
	}
	if len(tokens) < 2 {
		t.Errorf("runs came from %d term(s), want at least 2", len(tokens))
	}
	hist, err := insts[1].ledger.History(context.Background(), "every-second", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) == 0 || len(hist) > ledger.DefaultHistory {
		t.Errorf("ledger history has %d runs", len(hist))
	}
	for i := 1; i < len(hist); i++ {
		if !hist[i].Tick.Before(hist[i-1].Tick) {
			t.Errorf("history not strictly newest first at %d: %v then %v", i, hist[i-1].Tick, hist[i].Tick)
		}
	}
	var summary []string
	for _, r := range sorted {
		summary = append(summary, fmt.Sprintf("%s:%s/%d", r.tick.Format("05"), r.instance, r.token))
	}
	t.Logf("%d runs, %d terms, no tick twice: %v", len(runs), len(tokens), summary)
}

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
