package schedulerhost

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// newTestRun returns a run of a job "j" of a Host made from cfg, in a term
// of token 7 that lasts as long as ctx, and that term.
func newTestRun(t *testing.T, ctx context.Context, cfg Config) (*tickRun, *termRun) {
	t.Helper()
	if cfg.Jobs == nil {
		cfg.Jobs = []Job{{Name: "j", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}}
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	term, _ := h.newTerm(ctx, election.NewTerm(ctx, 7))
	t.Cleanup(term.close)
	tick := time.Now().Truncate(time.Second)
	return term.newRun(h.jobs[0], tick, false, false, turn{}), term
}

func TestChain_StepsWrapInOrder(t *testing.T) {
	var got []string
	named := func(name string) step {
		return func(next runFunc) runFunc {
			return func(r *tickRun) {
				got = append(got, name+">")
				next(r)
				got = append(got, "<"+name)
			}
		}
	}
	chain(func(*tickRun) { got = append(got, "last") }, named("a"), named("b"))(&tickRun{})
	if want := "a> b> last <b <a"; strings.Join(got, " ") != want {
		t.Errorf("chain ran %q, want %q", strings.Join(got, " "), want)
	}
}

func TestRecoverStep_PanicIsTheRunsError(t *testing.T) {
	r := &tickRun{}
	recoverStep(func(*tickRun) { panic("boom") })(r)
	if r.err == nil || !strings.HasPrefix(r.err.Error(), "panic: boom\n") || !strings.Contains(r.err.Error(), "goroutine") {
		t.Errorf("err = %v, want the panic with its stack", r.err)
	}
}

func TestTimeoutStep_EndsTheRunWithErrJobTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &tickRun{ctx: context.Background(), job: &jobState{Job: Job{Timeout: 3 * time.Second}}}
		start := time.Now()
		var ctx context.Context
		timeoutStep(func(r *tickRun) {
			ctx = r.ctx
			<-r.ctx.Done()
		})(r)
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("the run's context ended after %v, want 3s", took)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, ErrJobTimeout) {
			t.Errorf("cause = %v, want ErrJobTimeout", cause)
		}
	})
}

func TestOutcome(t *testing.T) {
	boom := errors.New("boom")
	live := context.Background()
	timedOut, cancel := context.WithCancelCause(live)
	cancel(ErrJobTimeout)
	lost, cancel := context.WithCancelCause(live)
	cancel(election.ErrLeadershipLost)
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		err     error
		want    ledger.Result
		wantErr string
	}{
		{"returned nil", timedOut, nil, ledger.ResultOK, ""},
		{"failed", live, boom, ledger.ResultFailed, "boom"},
		{"timeout", timedOut, boom, ledger.ResultTimeout, "boom (cause: schedulerhost: job timeout)"},
		{"cancelled", lost, boom, ledger.ResultCancelled, "boom (cause: election: leadership lost)"},
		{"cancelled, returned the cause", lost, election.ErrLeadershipLost, ledger.ResultCancelled, "election: leadership lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := outcome(tc.ctx, tc.err)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if res != tc.want || gotErr != tc.wantErr {
				t.Errorf("outcome = %v, %q; want %v, %q", res, gotErr, tc.want, tc.wantErr)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("the error %v does not wrap the run's %v", err, tc.err)
			}
		})
	}
}

func TestCountStep_CountsTheCallWhileItRuns(t *testing.T) {
	r, term := newTestRun(t, context.Background(), Config{})
	h := term.h
	r.ctx = r
	countStep(func(r *tickRun) {
		if h.Running() != 1 || term.calls.Load() != 1 {
			t.Errorf("during the call: Running %d, term calls %d; want 1, 1", h.Running(), term.calls.Load())
		}
		r.err = errors.New("boom")
	})(r)
	if h.Running() != 0 || term.calls.Load() != 0 {
		t.Errorf("after the call: Running %d, term calls %d; want 0, 0", h.Running(), term.calls.Load())
	}
	if !r.ran || r.result != ledger.ResultFailed || r.ended.IsZero() {
		t.Errorf("after the call: ran %v, result %v, ended %v; want true, failed, stamped", r.ran, r.result, r.ended)
	}
}

func TestGateStep_StartsOnlyWhileTheTermHolds(t *testing.T) {
	for _, tc := range []struct {
		name               string
		stopping, lost     bool
		claimed            bool
		wantNext, wantOver bool
	}{
		{name: "leading", wantNext: true},
		{name: "stopping", stopping: true},
		{name: "stopping, claimed already", stopping: true, claimed: true, wantNext: true},
		{name: "lost", lost: true, wantOver: true},
		{name: "lost, claimed already", lost: true, claimed: true, wantOver: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r, term := newTestRun(t, ctx, Config{})
			r.claimed = tc.claimed
			term.stopping.Store(tc.stopping)
			if tc.lost {
				cancel()
			}
			called := false
			gateStep(func(*tickRun) { called = true })(r)
			if called != tc.wantNext || r.over != tc.wantOver {
				t.Errorf("next called %v, over %v; want %v, %v", called, r.over, tc.wantNext, tc.wantOver)
			}
		})
	}
}

func TestGateStep_WaitsForTheClaimTurnAndPassesItOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newTestRun(t, context.Background(), Config{})
		prev, mine := make(chan struct{}), make(chan struct{})
		r.tn = turn{prev: prev, mine: mine}
		done := make(chan struct{})
		go func() {
			gateStep(func(*tickRun) {})(r)
			close(done)
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the run went on before the claim before it was decided")
		default:
		}
		close(prev)
		<-done
		select {
		case <-mine:
		default:
			t.Error("the run did not pass its claim turn on")
		}
	})
}

// claimLedger answers every Claim with err and records the claims.
type claimLedger struct {
	ledger.Ledger
	err    error
	mu     sync.Mutex
	claims []ledger.Claim
}

func (l *claimLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	errs := make([]error, len(cs))
	for i, c := range cs {
		errs[i] = l.claimOne(ctx, c)
	}
	return errs
}

func (l *claimLedger) MaxBatch() int { return 8 }

func (l *claimLedger) claimOne(_ context.Context, c ledger.Claim) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims = append(l.claims, c)
	return l.err
}

func TestClaimStep_StartsOnlyAClaimedTick(t *testing.T) {
	for _, tc := range []struct {
		name               string
		err                error
		claimed            bool
		wantClaims         int
		wantNext, wantOver bool
	}{
		{name: "claimed now", wantClaims: 1, wantNext: true},
		{name: "claimed already", claimed: true, wantNext: true},
		{name: "claimed by another term", err: ledger.ErrTickClaimed, wantClaims: 1},
		{name: "stale term", err: ledger.ErrStaleTerm, wantClaims: 1, wantOver: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &claimLedger{err: tc.err}
			r, _ := newTestRun(t, context.Background(), Config{Ledger: l, Instance: "i"})
			r.claimed = tc.claimed
			called := false
			claimStep(func(*tickRun) { called = true })(r)
			if len(l.claims) != tc.wantClaims || called != tc.wantNext || r.over != tc.wantOver {
				t.Errorf("claims %d, next called %v, over %v; want %d, %v, %v", len(l.claims), called, r.over, tc.wantClaims, tc.wantNext, tc.wantOver)
			}
			if len(l.claims) > 0 && (l.claims[0].Token != 7 || !l.claims[0].Tick.Equal(r.tick.Time) || l.claims[0].Job != "j") {
				t.Errorf("claim %+v, want job j, the run's tick, token 7", l.claims[0])
			}
		})
	}
}

// runObserver records what an Observer is told about runs.
type runObserver struct {
	Observer
	started  []time.Duration
	finished []ledger.Result
}

func (o *runObserver) RunStarted(_ string, _ time.Time, late time.Duration) {
	o.started = append(o.started, late)
}
func (o *runObserver) RunFinished(_ string, res ledger.Result, _ time.Duration) {
	o.finished = append(o.finished, res)
}

func TestObserveStep_TellsTheObserverStartAndResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &runObserver{}
		r, _ := newTestRun(t, context.Background(), Config{Observer: o})
		time.Sleep(250 * time.Millisecond) // the run starts late
		observeStep(func(r *tickRun) {
			if len(o.started) != 1 || len(o.finished) != 0 {
				t.Errorf("during the run: %d starts, %d ends told; want 1, 0", len(o.started), len(o.finished))
			}
			r.result, r.ran = ledger.ResultTimeout, true
		})(r)
		if len(o.started) != 1 || o.started[0] != 250*time.Millisecond {
			t.Errorf("lateness told %v, want [250ms]", o.started)
		}
		if len(o.finished) != 1 || o.finished[0] != ledger.ResultTimeout {
			t.Errorf("results told %v, want [timeout]", o.finished)
		}
	})
}
