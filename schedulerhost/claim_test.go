package schedulerhost_test

// Tests of the claims of ticks (claim.go, batch.go): faults, retries
// and their bound, and batches.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
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

// faultSecondTick returns a faultLedger on m's ledger that passes every
// claim but those of the second tick, which get fault's answer (attempt
// counts from 1), and the second tick, set once it is first claimed.
func faultSecondTick(m *memory.Server, fault func(attempt int, c ledger.Claim) (bool, error)) (*faultLedger, *time.Time) {
	lost := new(time.Time)
	return &faultLedger{Ledger: m.Ledger(), fault: func(tick, attempt int, c ledger.Claim) (bool, error) {
		if tick != 1 {
			return false, nil
		}
		*lost = c.Tick
		return fault(attempt, c)
	}}, lost
}

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
				fl, lost := faultSecondTick(m, func(attempt int, c ledger.Claim) (bool, error) {
					if attempt > 1 {
						return false, errReset // every later attempt for this tick: no answer
					}
					if tc.revoke {
						if err := m.Ledger().Claim(context.Background(), []ledger.Claim{c})[0]; err != nil {
							t.Errorf("recording the claim: %v", err)
						}
						m.RevokeToken(c.Token)
						return false, errReset
					}
					return true, errReset
				})
				n := startCounted(t, m, fl, &st)
				time.Sleep(12 * time.Second)
				n.stop(t)
				st.mu.Lock()
				for _, tk := range st.ticks {
					if tk.Equal(*lost) {
						t.Errorf("tick %v ran although its claim was given up", tk)
					}
				}
				st.mu.Unlock()
				found := false
				for _, r := range history(t, m, "t") {
					if r.Result == ledger.ResultRunning {
						t.Errorf("history: tick %v still %q after every run ended (token %d)", r.Tick.Format("15:04:05"), r.Result, r.Token)
					}
					if r.Tick.Equal(*lost) {
						found = true
						if r.Result != ledger.ResultCancelled || !strings.Contains(r.Error, "not started: claim outcome unknown") {
							t.Errorf("history: the given-up tick is %q (%q), want %q with a 'not started: claim outcome unknown' error", r.Result, r.Error, ledger.ResultCancelled)
						}
					}
				}
				if !found {
					t.Errorf("history has no entry for tick %v, whose claim was recorded", *lost)
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
		fl, lost := faultSecondTick(m, func(int, ledger.Claim) (bool, error) {
			return false, errReset // never answered: given up after ledgerTimeout
		})
		sf := &slowFinish{faultLedger: fl, failUntil: time.Now().Add(30 * time.Second)}
		n := startCounted(t, m, sf, &st)
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

// lateAnswerLedger answers the first claim of the first tick it sees
// with an unknown outcome just before the claim's time runs out, and
// never answers the claims of that tick after it (a backend that hangs).
type lateAnswerLedger struct {
	ledger.Ledger
	firstTick
	attempts int
}

// firstTick remembers the first tick a ledger was asked to claim.
type firstTick struct {
	mu    sync.Mutex
	first time.Time
}

// isLocked reports whether tick is the first one seen (and sees it),
// with f.mu held.
func (f *firstTick) isLocked(tick time.Time) bool {
	if f.first.IsZero() {
		f.first = tick
	}
	return tick.Equal(f.first)
}

// tick returns the first tick seen.
func (f *firstTick) tick() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

func (l *lateAnswerLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	return eachClaim(ctx, cs, func(ctx context.Context, c ledger.Claim) error {
		l.mu.Lock()
		mine := l.isLocked(c.Tick)
		if mine {
			l.attempts++
		}
		n := l.attempts
		l.mu.Unlock()
		switch {
		case !mine:
			return l.Ledger.Claim(ctx, []ledger.Claim{c})[0]
		case n == 1:
			time.Sleep(4800 * time.Millisecond)
			return errReset
		default:
			<-ctx.Done()
			return ctx.Err()
		}
	})
}

// A claim, its retries included, gives up within ledgerTimeout (5 s) of
// its start: a retry made just before the time runs out does not get a
// fresh 5 s. While the claim is in flight the job's next ticks are skipped
// as "previous run still going"; the history checker bounds that excuse
// by the claim timeout, so the ticks from 6 s after the first must run.
func TestHost_ClaimRetriesEndWithinTheClaimTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var st starts
		fl := &lateAnswerLedger{Ledger: m.Ledger()}
		n := startCounted(t, m, fl, &st)
		time.Sleep(12500 * time.Millisecond)
		n.stop(t)
		first := fl.tick()
		st.mu.Lock()
		defer st.mu.Unlock()
		ran := map[time.Time]bool{}
		for _, tk := range st.ticks {
			ran[tk] = true
		}
		for s := 6; s <= 11; s++ {
			if tk := first.Add(time.Duration(s) * time.Second); !ran[tk] {
				t.Errorf("tick %v (%d s after the first, whose claim hung) did not run; ran: %v", tk.Format("15:04:05"), s, st.ticks)
			}
		}
	})
}

// hangFirst is a ledger whose claim of the first tick it sees waits until
// its context ends, as on a backend that does not answer.
type hangFirst struct {
	ledger.Ledger
	firstTick
}

func (l *hangFirst) Claim(ctx context.Context, cs []ledger.Claim) []error {
	return eachClaim(ctx, cs, func(ctx context.Context, c ledger.Claim) error {
		l.mu.Lock()
		mine := l.isLocked(c.Tick)
		l.mu.Unlock()
		if !mine {
			return l.Ledger.Claim(ctx, []ledger.Claim{c})[0]
		}
		<-ctx.Done()
		return ctx.Err()
	})
}

// A tick admitted while the claim of the job's run before it hangs waits
// for its turn; if the term stops meanwhile, it does not start, and it
// says so. It used to go unsaid: a soak (consul-cluster, lane 4, term
// 26206) found a tick that its live leader neither ran nor explained.
func TestHost_RunStoppedBeforeItsClaimSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl := &hangFirst{Ledger: newMemory().Ledger()}
		// Ticks 1 (hung) and 2 (its turn after 1), then a step-down.
		logs := leadTerm7(t, fl, 2500*time.Millisecond,
			schedulerhost.Job{Name: "t", Schedule: "@every 1s", Overlap: schedulerhost.OverlapAllow, Run: nop})
		said := map[string]bool{}
		for _, msg := range []string{"run not started: term stopping", "run not started: term over", "run not started: claim failed", "run started"} {
			for _, m := range logLines(t, logs, msg) {
				said[m["tick"].(string)] = true
			}
		}
		first := fl.tick()
		for s := 0; s < 2; s++ {
			tick := first.Add(time.Duration(s) * time.Second).Format(time.RFC3339Nano)
			if !said[tick] {
				t.Errorf("tick %s: admitted, not started, and not said why; said: %v", tick, said)
			}
		}
	})
}

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
