package schedulerhost_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// node is one instance in a synctest bubble: an elector on a memory store
// running a Host.
type node struct {
	name    string
	backend *memory.Backend
	elector *election.Elector
	host    *schedulerhost.Host
	cancel  context.CancelFunc
	done    chan error
}

func startNode(t *testing.T, m *memory.Server, name string, cfg schedulerhost.Config, opts ...func(*schedulerhost.Host)) *node {
	t.Helper()
	b := m.Candidate()
	e, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: name}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.Ledger == nil {
		cfg.Ledger = m.Ledger()
	}
	cfg.Instance = name
	h, err := schedulerhost.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{name: name, backend: b, elector: e, host: h, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- e.Run(ctx, h.Lead) }()
	synctest.Wait()
	return n
}

// stop cancels the node's Run and waits for it.
func (n *node) stop(t *testing.T) {
	t.Helper()
	n.cancel()
	if err := <-n.done; err != nil {
		t.Errorf("%s: Run: %v", n.name, err)
	}
}

// history returns the newest limit entries of job's history, as n's Host
// reads them.
func (n *node) history(t *testing.T, job string, limit int) []ledger.Run {
	t.Helper()
	hist, err := n.host.History(t.Context(), job, limit)
	if err != nil {
		t.Fatal(err)
	}
	return hist
}

// startCounted starts node "a" on m with the ledger l and one job "t",
// due every second, whose runs st records.
func startCounted(t *testing.T, m *memory.Server, l ledger.Ledger, st *starts) *node {
	t.Helper()
	return startNode(t, m, "a", schedulerhost.Config{Ledger: l, Jobs: []schedulerhost.Job{{
		Name: "t", Schedule: "@every 1s",
		Run: func(ctx context.Context) error { st.add(ctx); return nil },
	}}})
}

// starts records the start and end of runs, in fake time.
type starts struct {
	mu     sync.Mutex
	at     []time.Time
	ticks  []time.Time
	causes []error
}

func (s *starts) add(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, time.Now())
	tk, _ := schedulerhost.TickFromContext(ctx)
	s.ticks = append(s.ticks, tk.Time)
}

func (s *starts) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

func newMemory() *memory.Server {
	return memory.New(election.Timing{TTL: 5 * time.Second})
}

func TestHost_Overlap(t *testing.T) {
	for _, tc := range []struct {
		policy schedulerhost.Overlap
		want   int // starts in 10.5 s of ticks every 1 s with 2.5 s runs
	}{
		{schedulerhost.OverlapSkip, 4},   // 1, 4, 7, 10
		{schedulerhost.OverlapAllow, 10}, // every tick
		{schedulerhost.OverlapQueue, 5},  // 1, 3.5, 6, 8.5, 11 (started at 11?) -> see below
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemory()
				var st starts
				n := startNode(t, m, "a", schedulerhost.Config{ShutdownTimeout: time.Minute, Jobs: []schedulerhost.Job{{
					Name: "slow", Schedule: "@every 1s", Overlap: tc.policy,
					Run: func(ctx context.Context) error {
						st.add(ctx)
						time.Sleep(2500 * time.Millisecond)
						return nil
					},
				}}})
				time.Sleep(10500 * time.Millisecond)
				got := st.count()
				n.stop(t)
				want := tc.want
				if tc.policy == schedulerhost.OverlapQueue {
					want = 4 // starts at 1, 3.5, 6, 8.5 within 10.5 s
				}
				if got != want {
					t.Errorf("starts = %d, want %d (at %v)", got, want, st.at)
				}
				if tc.policy == schedulerhost.OverlapQueue {
					// Queued ticks keep their identity: 1s, 2s, 3s, 4s.
					for i, tk := range st.ticks {
						if want := st.ticks[0].Add(time.Duration(i) * time.Second); !tk.Equal(want) {
							t.Errorf("queued run %d has tick %v, want %v", i, tk, want)
						}
					}
				}
			})
		})
	}
}

func TestHost_PanickingJobIsAFailedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var calls atomic.Int64
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: []schedulerhost.Job{{
			Name: "boom", Schedule: "@every 1s",
			Run: func(ctx context.Context) error {
				calls.Add(1)
				panic("kaboom")
			},
		}}})
		time.Sleep(3500 * time.Millisecond)
		if calls.Load() != 3 {
			t.Errorf("calls = %d, want 3 (a panic must not stop the schedule)", calls.Load())
		}
		if !n.elector.IsLeader() {
			t.Error("a panicking job ended the term")
		}
		hist, _ := n.host.History(context.Background(), "boom", 5)
		if len(hist) != 3 || hist[0].Result != ledger.ResultFailed {
			t.Fatalf("history = %+v, want 3 failed runs", hist)
		}
		if want := "panic: kaboom"; len(hist[0].Error) < len(want) || hist[0].Error[:len(want)] != want {
			t.Errorf("error = %q, want it to start with %q", hist[0].Error, want)
		}
		n.stop(t)
	})
}

func TestHost_LeadWithNewTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan uint64, 1)
		h, err := schedulerhost.New(schedulerhost.Config{Logger: quiet, Jobs: []schedulerhost.Job{{
			Name: "x", Schedule: "@every 1s",
			Run: func(ctx context.Context) error {
				tok, _ := election.TokenFromContext(ctx)
				got <- tok
				return nil
			},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		if err := h.Lead(ctx, election.NewTerm(context.Background(), 7)); err != nil {
			t.Fatalf("Lead: %v", err)
		}
		select {
		case tok := <-got:
			if tok != 7 {
				t.Errorf("token = %d, want 7", tok)
			}
		default:
			t.Error("no run under a NewTerm term")
		}
	})
}

func TestHost_JobTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		cause := make(chan error, 10)
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: []schedulerhost.Job{{
			Name: "bounded", Schedule: "@every 5s", Timeout: 2 * time.Second,
			Run: func(ctx context.Context) error {
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return ctx.Err()
			},
		}}})
		time.Sleep(7500 * time.Millisecond)
		if c := <-cause; !errors.Is(c, schedulerhost.ErrJobTimeout) {
			t.Errorf("cause = %v, want ErrJobTimeout", c)
		}
		hist, _ := n.host.History(context.Background(), "bounded", 1)
		if len(hist) != 1 || hist[0].Result != ledger.ResultTimeout || hist[0].Ended.Sub(hist[0].Started) != 2*time.Second {
			t.Errorf("history = %+v, want one timeout run of 2s", hist)
		}
		n.stop(t)
	})
}

func TestHost_RunContextCarriesTokenAndTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		type seen struct {
			token uint64
			tick  schedulerhost.Tick
			start time.Time
		}
		ch := make(chan seen, 10)
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: []schedulerhost.Job{{
			Name: "look", Schedule: "*/2 * * * * *",
			Run: func(ctx context.Context) error {
				tok, _ := election.TokenFromContext(ctx)
				tk, _ := schedulerhost.TickFromContext(ctx)
				ch <- seen{tok, tk, time.Now()}
				return nil
			},
		}}})
		time.Sleep(2100 * time.Millisecond)
		s := <-ch
		info, _ := m.Leader(context.Background())
		if s.token != info.Token || s.token == 0 {
			t.Errorf("token = %d, want the term's %d", s.token, info.Token)
		}
		if s.tick.Job != "look" || s.tick.Time.Second()%2 != 0 || s.tick.Time.Nanosecond() != 0 || s.tick.Time.After(s.start) {
			t.Errorf("tick = %+v (start %v), want the nominal even second", s.tick, s.start)
		}
		n.stop(t)
	})
}

// eachClaim answers a batch of claims by asking claim about each, in
// order: a fake ledger's Claim.
func eachClaim(ctx context.Context, cs []ledger.Claim, claim func(context.Context, ledger.Claim) error) []error {
	errs := make([]error, len(cs))
	for i, c := range cs {
		errs[i] = claim(ctx, c)
	}
	return errs
}

// staleLedger refuses every claim as stale.
type staleLedger struct{ ledger.Ledger }

func (staleLedger) Claim(_ context.Context, cs []ledger.Claim) []error {
	errs := make([]error, len(cs))
	for i := range errs {
		errs[i] = ledger.ErrStaleTerm
	}
	return errs
}

func TestHost_StaleClaimEndsTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var calls atomic.Int64
		n := startNode(t, m, "a", schedulerhost.Config{Ledger: staleLedger{m.Ledger()}, Jobs: []schedulerhost.Job{{
			Name: "never", Schedule: "@every 1s",
			Run: func(ctx context.Context) error { calls.Add(1); return nil },
		}}})
		first, _ := n.elector.Term()
		time.Sleep(1500 * time.Millisecond)
		if calls.Load() != 0 {
			t.Errorf("a run started despite a refused claim")
		}
		now, ok := n.elector.Term()
		if !ok || now.Token <= first.Token {
			t.Errorf("term after the stale claim = %+v (leading %v), want a new term with a token above %d", now, ok, first.Token)
		}
		select {
		case err := <-n.done:
			t.Fatalf("Run returned %v; a stale claim must end the term, not the elector", err)
		default:
		}
		n.stop(t)
	})
}

func TestHost_ManySchedulesFireOnTheirTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		specs := []string{"@every 1s", "*/2 * * * * *", "*/3 * * * * *", "@every 7s", "0 * * * * *", "CRON_TZ=Asia/Kolkata */5 * * * * *"}
		var mu sync.Mutex
		got := map[string][]time.Time{}
		var jobs []schedulerhost.Job
		for i := range 60 { // 10 jobs per spec: they share buckets
			spec := specs[i%len(specs)]
			name := fmt.Sprintf("j%02d", i)
			jobs = append(jobs, schedulerhost.Job{Name: name, Schedule: spec, Run: func(ctx context.Context) error {
				tk, _ := schedulerhost.TickFromContext(ctx)
				if time.Since(tk.Time) != 0 {
					t.Errorf("%s started %v after its tick", name, time.Since(tk.Time))
				}
				mu.Lock()
				got[name] = append(got[name], tk.Time)
				mu.Unlock()
				return nil
			}})
		}
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: jobs})
		start := time.Now()
		time.Sleep(2*time.Minute + 500*time.Millisecond)
		n.stop(t)
		for i, j := range jobs {
			s, _ := schedulerhost.ParseSchedule(j.Schedule)
			var want []time.Time
			for tk := s.Next(start); !tk.After(start.Add(2*time.Minute + 500*time.Millisecond)); tk = s.Next(tk) {
				want = append(want, tk)
			}
			if len(got[j.Name]) != len(want) {
				t.Errorf("job %d (%s): %d runs, want %d", i, j.Schedule, len(got[j.Name]), len(want))
				continue
			}
			for k := range want {
				if !got[j.Name][k].Equal(want[k]) {
					t.Errorf("job %d (%s): run %d at tick %v, want %v", i, j.Schedule, k, got[j.Name][k], want[k])
					break
				}
			}
		}
	})
}

// flakyLedger fails some claims with an error that leaves them unknown:
// lost ones were not recorded; committed ones were.
type flakyLedger struct {
	ledger.Ledger
	mu        sync.Mutex
	calls     int
	lostAt    int // this call fails without recording
	commitAt  int // this call records, then fails
	ambiguous error
}

func (f *flakyLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	return eachClaim(ctx, cs, f.claimOne)
}

func (f *flakyLedger) claimOne(ctx context.Context, c ledger.Claim) error {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	switch n {
	case f.lostAt:
		return f.ambiguous
	case f.commitAt:
		if err := f.Ledger.Claim(ctx, []ledger.Claim{c})[0]; err != nil {
			return err
		}
		return f.ambiguous
	}
	return f.Ledger.Claim(ctx, []ledger.Claim{c})[0]
}

func TestHost_AmbiguousClaimIsAskedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var st starts
		fl := &flakyLedger{Ledger: m.Ledger(), lostAt: 1, commitAt: 3, ambiguous: errors.New("connection reset by peer")}
		n := startCounted(t, m, fl, &st)
		time.Sleep(3500 * time.Millisecond)
		n.stop(t)
		// Tick 1: lost, asked again, runs. Tick 2: fine. Tick 3: recorded
		// but failed, asked again: "already claimed" by us, so it runs.
		if st.count() != 3 {
			t.Fatalf("runs = %d (ticks %v), want 3: an unknown claim must be asked again, not lose the tick", st.count(), st.ticks)
		}
		for i := 1; i < len(st.ticks); i++ {
			if !st.ticks[i].Equal(st.ticks[i-1].Add(time.Second)) {
				t.Errorf("ticks %v: want three consecutive seconds", st.ticks)
			}
		}
	})
}

// TestHost_NoStartInTheLastMomentsOfAnUnrenewedTerm: a tick whose claim
// comes back with less than the start margin left of a term whose renewal
// is held (the path to the backend cut) does not start: its process would
// be stopped at once, before doing anything. If the renewal lands, the run
// starts then.
//
// TTL 5 s: SafetyMargin 1 s, RenewInterval 1.667 s. The term opens at
// 0.9 s, the second renewal is sent at 4.233 s and the path is cut right
// after it: the deadline is 8.233 s, and the tick of 8 s finds 233 ms left.
func TestHost_NoStartInTheLastMomentsOfAnUnrenewedTerm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		healAt time.Duration // 0: never
		want8  bool          // the tick of 8 s runs
	}{
		{"renewal never lands", 0, false},
		{"renewal lands during the wait", 8100 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				var logs envtest.Buffer
				type start struct {
					tick time.Time
					at   time.Duration
					left time.Duration
				}
				var mu sync.Mutex
				var runs []start
				time.Sleep(900 * time.Millisecond)
				n := startNode(t, newMemory(), "a", schedulerhost.Config{ShutdownTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Jobs: []schedulerhost.Job{{
					Name: "every-second", Schedule: "* * * * * *",
					Run: func(ctx context.Context) error {
						d, ok := election.LocalDeadline(ctx)
						if !ok {
							t.Error("a run's context carries no lease")
						}
						tk, _ := schedulerhost.TickFromContext(ctx)
						mu.Lock()
						runs = append(runs, start{tk.Time, time.Since(t0), time.Until(d)})
						mu.Unlock()
						return nil
					},
				}}})
				time.Sleep(4300*time.Millisecond - time.Since(t0))
				n.backend.Cut()
				if tc.healAt > 0 {
					time.Sleep(tc.healAt - time.Since(t0))
					n.backend.Heal()
				}
				time.Sleep(9 * time.Second)
				n.stop(t)

				mu.Lock()
				defer mu.Unlock()
				ran8 := false
				for _, s := range runs {
					if s.left < 200*time.Millisecond {
						t.Errorf("tick %s started at %v with %v of its term left", s.tick.Sub(t0), s.at, s.left)
					}
					if s.tick.Sub(t0) == 8*time.Second {
						ran8 = true
						// The wait looks again every 10 ms.
						if tc.want8 && (s.at < tc.healAt || s.at > tc.healAt+10*time.Millisecond) {
							t.Errorf("tick 8s started at %v, want within 10ms of %v (when the renewal landed)", s.at, tc.healAt)
						}
					}
				}
				if ran8 != tc.want8 {
					t.Errorf("tick 8s ran: %v, want %v (runs %+v)", ran8, tc.want8, runs)
				}
				log := logs.String()
				if !tc.want8 && !strings.Contains(log, `msg="run not started: term over" job=every-second tick=2000-01-01T00:00:08.000Z`) {
					t.Errorf("no \"run not started\" for the tick of 8 s in the log:\n%s", log)
				}
				if tc.want8 && !strings.Contains(log, `msg="run start waited for the lease renewal" job=every-second tick=2000-01-01T00:00:08.000Z`) {
					t.Errorf("no word of the wait in the log:\n%s", log)
				}
			})
		})
	}
}
