package schedulerhost_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// faultLedger injects claim faults by tick: fault is asked about every
// claim with the index of its tick among the distinct ticks claimed so far
// (0 for the first) and the attempt number for that tick (1 for the
// first). A nil error passes the claim through; otherwise the claim is
// recorded first if record says so, then err is returned (an ambiguous
// failure: the caller cannot tell whether it was recorded).
type faultLedger struct {
	ledger.Ledger
	fault func(tick, attempt int, c ledger.Claim) (record bool, err error)

	mu       sync.Mutex
	ticks    []time.Time
	attempts map[time.Time]int
}

func (f *faultLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	return eachClaim(ctx, cs, f.claimOne)
}

func (f *faultLedger) claimOne(ctx context.Context, c ledger.Claim) error {
	f.mu.Lock()
	if f.attempts == nil {
		f.attempts = map[time.Time]int{}
	}
	idx := -1
	for i, tk := range f.ticks {
		if tk.Equal(c.Tick) {
			idx = i
		}
	}
	if idx < 0 {
		idx = len(f.ticks)
		f.ticks = append(f.ticks, c.Tick)
	}
	f.attempts[c.Tick]++
	n := f.attempts[c.Tick]
	f.mu.Unlock()
	if record, err := f.fault(idx, n, c); err != nil {
		if record {
			if err := f.Ledger.Claim(ctx, []ledger.Claim{c})[0]; err != nil {
				return err
			}
		}
		return err
	}
	return f.Ledger.Claim(ctx, []ledger.Claim{c})[0]
}

var errReset = errors.New("connection reset by peer")

// history reads the job's whole history from the store, oldest first.
func history(t *testing.T, m *memory.Server, job string) []ledger.Run {
	t.Helper()
	runs, err := m.Ledger().History(context.Background(), job, ledger.DefaultHistory)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	return runs
}

// With OverlapAllow, a tick whose claim is being asked again must not be
// overtaken by the next ticks' claims: each tick runs exactly once, in
// order, and the history ends with no run left "running".
func TestHost_ClaimRetryIsNotOvertaken(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(tick, attempt int, c ledger.Claim) (bool, error)
	}{
		// The second tick's first four claims are lost (1.5 s of asking).
		{"lost", func(tick, attempt int, c ledger.Claim) (bool, error) {
			if tick == 1 && attempt <= 4 {
				return false, errReset
			}
			return false, nil
		}},
		// The second tick's first claim is recorded but its answer lost;
		// the next four are lost too (3.1 s of asking).
		{"recorded", func(tick, attempt int, c ledger.Claim) (bool, error) {
			if tick == 1 && attempt <= 5 {
				return attempt == 1, errReset
			}
			return false, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemory()
				var st starts
				fl := &faultLedger{Ledger: m.Ledger(), fault: tc.fault}
				n := startNode(t, m, "a", schedulerhost.Config{Ledger: fl, Jobs: []schedulerhost.Job{{
					Name: "t", Schedule: "@every 1s", Overlap: schedulerhost.OverlapAllow,
					Run: func(ctx context.Context) error { st.add(ctx); return nil },
				}}})
				time.Sleep(8500 * time.Millisecond)
				n.stop(t)
				st.mu.Lock()
				ticks := append([]time.Time(nil), st.ticks...)
				st.mu.Unlock()
				// Claims are in tick order; runs of OverlapAllow claimed at
				// the same instant start side by side, in any order.
				slices.SortFunc(ticks, time.Time.Compare)
				if len(ticks) != 8 {
					t.Errorf("%d runs (ticks %v), want 8: one per tick", len(ticks), ticks)
				}
				for i := 1; i < len(ticks); i++ {
					if !ticks[i].Equal(ticks[i-1].Add(time.Second)) {
						t.Errorf("run %d has tick %v after %v: want consecutive seconds, each once", i, ticks[i].Format("15:04:05"), ticks[i-1].Format("15:04:05"))
					}
				}
				for _, r := range history(t, m, "t") {
					if r.Result != ledger.ResultOK {
						t.Errorf("history: tick %v is %q (%s), want ok", r.Tick.Format("15:04:05"), r.Result, r.Error)
					}
				}
			})
		})
	}
}

// A claim that was recorded but whose answer was lost, and that the Host
// then gives up on (the retry says the term is stale, or the claim's time
// runs out), leaves a tick that counts as claimed and never ran: its
// history entry must say so, not "running" forever.
func TestHost_UnknownClaimOutcomeIsRecordedAsNotStarted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		revoke bool // the first attempt also ends the term on the store
	}{
		{"stale", true},
		{"timeout", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemory()
				var st starts
				var lost time.Time
				fl := &faultLedger{Ledger: m.Ledger()}
				fl.fault = func(tick, attempt int, c ledger.Claim) (bool, error) {
					if tick != 1 {
						return false, nil
					}
					if attempt == 1 {
						lost = c.Tick
						if tc.revoke {
							if err := fl.Ledger.Claim(context.Background(), []ledger.Claim{c})[0]; err != nil {
								t.Errorf("recording the claim: %v", err)
							}
							m.RevokeToken(c.Token)
							return false, errReset
						}
						return true, errReset
					}
					return false, errReset // every later attempt for this tick: no answer
				}
				n := startNode(t, m, "a", schedulerhost.Config{Ledger: fl, Jobs: []schedulerhost.Job{{
					Name: "t", Schedule: "@every 1s",
					Run: func(ctx context.Context) error { st.add(ctx); return nil },
				}}})
				time.Sleep(12 * time.Second)
				n.stop(t)
				st.mu.Lock()
				for _, tk := range st.ticks {
					if tk.Equal(lost) {
						t.Errorf("tick %v ran although its claim was given up", tk)
					}
				}
				st.mu.Unlock()
				found := false
				for _, r := range history(t, m, "t") {
					if r.Result == ledger.ResultRunning {
						t.Errorf("history: tick %v still %q after every run ended (token %d)", r.Tick.Format("15:04:05"), r.Result, r.Token)
					}
					if r.Tick.Equal(lost) {
						found = true
						if r.Result != ledger.ResultCancelled || !strings.Contains(r.Error, "not started: claim outcome unknown") {
							t.Errorf("history: the given-up tick is %q (%q), want %q with a 'not started: claim outcome unknown' error", r.Result, r.Error, ledger.ResultCancelled)
						}
					}
				}
				if !found {
					t.Errorf("history has no entry for tick %v, whose claim was recorded", lost)
				}
			})
		})
	}
}

// slowFinish is a faultLedger whose Finish of an entry saying "claim
// outcome unknown" fails for a while, as on a backend that is down.
type slowFinish struct {
	*faultLedger
	failUntil time.Time
}

func (f *slowFinish) Finish(ctx context.Context, rs []ledger.Run) []error {
	for _, r := range rs {
		if strings.Contains(r.Error, "claim outcome unknown") && time.Now().Before(f.failUntil) {
			errs := make([]error, len(rs))
			for i := range errs {
				errs[i] = errReset
			}
			return errs
		}
	}
	return f.faultLedger.Finish(ctx, rs)
}

// A claim given up with its outcome unknown is written to the history as
// not started; that write, slow or failing, must not hold the job's next
// ticks back: the run no longer counts as active while it is written.
func TestHost_SlowNotStartedWriteDoesNotSkipTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var st starts
		var lost time.Time
		fl := &faultLedger{Ledger: m.Ledger()}
		fl.fault = func(tick, attempt int, c ledger.Claim) (bool, error) {
			if tick != 1 {
				return false, nil
			}
			lost = c.Tick
			return false, errReset // never answered: given up after ledgerTimeout
		}
		sf := &slowFinish{faultLedger: fl, failUntil: time.Now().Add(30 * time.Second)}
		n := startNode(t, m, "a", schedulerhost.Config{Ledger: sf, Jobs: []schedulerhost.Job{{
			Name: "t", Schedule: "@every 1s",
			Run: func(ctx context.Context) error { st.add(ctx); return nil },
		}}})
		time.Sleep(14 * time.Second)
		n.stop(t)
		st.mu.Lock()
		defer st.mu.Unlock()
		// The lost tick's claim is given up about 5 s after it; from the
		// next tick on, every tick runs, while its entry is retried.
		var after []time.Time
		for _, tk := range st.ticks {
			if tk.After(lost.Add(6 * time.Second)) {
				after = append(after, tk)
			}
		}
		if len(after) < 5 {
			t.Errorf("ticks run from 6 s after the given-up tick %v: %d (%v), want one a second", lost.Format("15:04:05"), len(after), after)
		}
	})
}
