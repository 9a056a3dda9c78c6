package schedulerhost_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

func TestJitterDelay(t *testing.T) {
	tick := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	const jitter = 30 * time.Second
	d := schedulerhost.JitterDelay("report", tick, jitter)
	if d < 0 || d >= jitter {
		t.Fatalf("JitterDelay = %v, want in [0, %v)", d, jitter)
	}
	// The same instant in another zone, asked again: the same delay.
	if again := schedulerhost.JitterDelay("report", tick.In(time.FixedZone("X", 3600)), jitter); again != d {
		t.Errorf("JitterDelay of the same tick in another zone = %v, want %v", again, d)
	}
	// It spreads: ticks and jobs get different delays.
	seen := map[time.Duration]bool{d: true}
	for i := 1; i < 20; i++ {
		seen[schedulerhost.JitterDelay("report", tick.Add(time.Duration(i)*time.Minute), jitter)] = true
		seen[schedulerhost.JitterDelay("report"+string(rune('a'+i)), tick, jitter)] = true
	}
	if len(seen) < 35 {
		t.Errorf("%d distinct delays of 39, want them spread", len(seen))
	}
	if z := schedulerhost.JitterDelay("report", tick, 0); z != 0 {
		t.Errorf("JitterDelay without jitter = %v, want 0", z)
	}
}

// runLog records runs of jobs: the tick, the start, the token.
type runLog struct {
	mu   sync.Mutex
	runs []loggedRun
}

type loggedRun struct {
	job     string
	tick    time.Time
	at      time.Time
	token   uint64
	catchUp bool
}

func (l *runLog) add(ctx context.Context) {
	tk, _ := schedulerhost.TickFromContext(ctx)
	tok, _ := election.TokenFromContext(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, loggedRun{tk.Job, tk.Time, time.Now(), tok, tk.CatchUp})
}

func (l *runLog) of(job string) []loggedRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loggedRun
	for _, r := range l.runs {
		if r.job == job {
			out = append(out, r)
		}
	}
	return out
}

// latenessObserver records the lateness the Host reports per job.
type latenessObserver struct {
	retryObserver
	mu   sync.Mutex
	late map[string][]time.Duration
}

func (o *latenessObserver) RunStarted(job string, _ time.Time, late time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.late == nil {
		o.late = map[string][]time.Duration{}
	}
	o.late[job] = append(o.late[job], late)
}

// TestHost_JitterDelaysTheStartNotTheTick: a jittered run starts
// JitterDelay after its tick, with the nominal tick in its context and
// the ledger; the run of another job at the same instant is claimed and
// started at once, not held up by the jittered one's wait.
func TestHost_JitterDelaysTheStartNotTheTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var log runLog
		o := &latenessObserver{}
		run := func(ctx context.Context) error { log.add(ctx); return nil }
		n := startNode(t, m, "a", schedulerhost.Config{Observer: o, Jobs: []schedulerhost.Job{
			{Name: "spread", Schedule: "0 * * * * *", Jitter: 30 * time.Second, Run: run},
			{Name: "plain", Schedule: "0 * * * * *", Run: run},
		}})
		time.Sleep(3*time.Minute + 45*time.Second)
		n.stop(t)
		spread, plain := log.of("spread"), log.of("plain")
		if len(spread) != 3 || len(plain) != 3 {
			t.Fatalf("%d and %d runs, want 3 of each", len(spread), len(plain))
		}
		for i, r := range spread {
			want := time.Date(2000, 1, 1, 0, i+1, 0, 0, time.UTC) // synctest's clock starts at 2000-01-01 UTC
			if !r.tick.Equal(want) {
				t.Errorf("run %d: TickFromContext %v, want the nominal %v", i, r.tick, want)
			}
			if d := schedulerhost.JitterDelay("spread", r.tick, 30*time.Second); !r.at.Equal(r.tick.Add(d)) || d == 0 {
				t.Errorf("run of %v started at %v, want its tick + JitterDelay %v", r.tick, r.at, d)
			}
			if !plain[i].at.Equal(plain[i].tick) {
				t.Errorf("plain run of %v started at %v: held up by the jittered run of its instant", plain[i].tick, plain[i].at)
			}
		}
		hist, _ := m.Ledger().History(context.Background(), "spread", 10)
		for i, h := range hist {
			if want := spread[len(spread)-1-i]; !h.Tick.Equal(want.tick) || !h.Started.Equal(want.at) || h.Result != ledger.ResultOK {
				t.Errorf("history %d = %+v, want tick %v started %v, ok", i, h, want.tick, want.at)
			}
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, late := range o.late["spread"] {
			if late != 0 {
				t.Errorf("lateness %v, want 0 (measured from the tick plus its delay)", late)
			}
		}
	})
}

// TestHost_JitterFailover: a leader lost during a run's jitter wait has
// not claimed the tick; the next leader runs it once (a missed tick,
// caught up), and computes the same delays for the ticks after.
func TestHost_JitterFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var log runLog
		jobs := []schedulerhost.Job{{Name: "spread", Schedule: "0 * * * * *", Jitter: 30 * time.Second,
			Run: func(ctx context.Context) error { log.add(ctx); return nil }}}
		a := startNode(t, m, "a", schedulerhost.Config{Jobs: jobs})
		b := startNode(t, m, "b", schedulerhost.Config{Jobs: jobs})
		if !a.elector.IsLeader() {
			t.Fatal("a does not lead")
		}
		tick2 := time.Date(2000, 1, 1, 0, 2, 0, 0, time.UTC)
		d2 := schedulerhost.JitterDelay("spread", tick2, 30*time.Second)
		if d2 < 2*time.Second {
			t.Fatalf("the test wants a delay of 2s or more at %v, has %v", tick2, d2)
		}
		time.Sleep(time.Until(tick2.Add(time.Second))) // a waits the delay of tick 2
		if !m.Revoke() {
			t.Fatal("no lease to revoke")
		}
		synctest.Wait()
		if !b.elector.IsLeader() {
			t.Fatal("b does not lead after a's loss")
		}
		time.Sleep(time.Until(tick2.Add(2 * time.Minute)))
		a.stop(t)
		b.stop(t)
		runs := log.of("spread")
		byTick := map[time.Time][]loggedRun{}
		for _, r := range runs {
			byTick[r.tick] = append(byTick[r.tick], r)
		}
		if got := byTick[tick2]; len(got) != 1 || !got[0].catchUp || got[0].token == 1 {
			t.Fatalf("runs of %v: %+v; want one, a catch-up by b", tick2, got)
		}
		for tick, rs := range byTick {
			if len(rs) != 1 {
				t.Errorf("tick %v ran %d times", tick, len(rs))
			}
			if r := rs[0]; !r.catchUp {
				if d := schedulerhost.JitterDelay("spread", tick, 30*time.Second); !r.at.Equal(tick.Add(d)) {
					t.Errorf("run of %v (token %d) started at %v, want its tick + JitterDelay %v", tick, r.token, r.at, d)
				}
			}
		}
		if len(byTick) != 3 { // 1m by a, 2m caught up by b, 3m by b
			t.Errorf("ticks run: %d, want 3 (%+v)", len(byTick), runs)
		}
		hist, _ := m.Ledger().History(context.Background(), "spread", 10)
		for _, h := range hist {
			if h.Tick.Equal(tick2) && (h.Token != byTick[tick2][0].token || h.Result != ledger.ResultOK) {
				t.Errorf("history of %v: %+v, want b's run, ok", tick2, h)
			}
		}
	})
}
