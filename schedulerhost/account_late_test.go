package schedulerhost_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// unwritable fails every fenced write of an Account with err, as a store
// that cannot be reached, or one where a later term raised the fence.
type unwritable struct {
	control.Store
	err error
}

func (s unwritable) Put(ctx context.Context, p control.Put) (int64, error) {
	if strings.HasPrefix(p.Key, audit.Prefix) && p.Token != 0 {
		return 0, s.err
	}
	return s.Store.Put(ctx, p)
}

// writeFailures counts what AccountWriteFailed is told, by what.
type writeFailures struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *writeFailures) RunStarted(string, time.Time, time.Duration)      {}
func (w *writeFailures) RunFinished(string, ledger.Result, time.Duration) {}
func (w *writeFailures) Misfired(string, int)                             {}
func (w *writeFailures) OverlapSkipped(string)                            {}
func (w *writeFailures) Drained(time.Duration, int)                       {}
func (w *writeFailures) AccountWriteFailed(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]int{}
	}
	w.n[what]++
}

func (w *writeFailures) count(what string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[what]
}

// TestAccount_LateNote: a leader's overlap skips, which no ledger entry
// backs, are still accounted when none of its Account writes lands
// (each fails, or finds the term over): the term leaves them in a late
// note, every reader applies it, and the next term merges it into the
// Account and deletes it. Before late notes, the skips were dropped and
// read as ticks missed while nobody led.
func TestAccount_LateNote(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		counted bool // a failure the metric counts (not the term's end)
	}{
		{"writes fail", errors.New("dial tcp: connection refused"), true},
		{"term over", ledger.ErrStaleTerm, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemory()
				t0 := time.Now()
				time.Sleep(300 * time.Millisecond)
				slow := schedulerhost.Job{Name: "slow", Schedule: "@every 1s", Run: func(ctx context.Context) error {
					time.Sleep(2500 * time.Millisecond)
					return nil
				}}
				// Two more such jobs: a write that finds the term over
				// must not drop the other jobs' records taken with it.
				slow2, slow3 := slow, slow
				slow2.Name, slow3.Name = "slow2", "slow3"
				obs := &writeFailures{}
				cfg := schedulerhost.Config{Control: unwritable{m.Control(), tc.err}, Jobs: []schedulerhost.Job{slow, slow2, slow3}, Observer: obs}
				a := startNode(t, m, "a", cfg)
				time.Sleep(8*time.Second + 200*time.Millisecond)
				to := time.Now() // ticks 1 to 8: runs at 1, 4, 7; the rest skipped
				a.stop(t)
				if st, _ := stored(t, m.Control(), "slow"); len(st.Ranges) != 0 {
					t.Fatalf("an Account write landed: %+v", st.Ranges)
				}
				for _, job := range []string{"slow", "slow2", "slow3"} {
					rep := reportOf(t, a.host, job, t0, to)
					checkSums(t, rep, 8)
					if got := countOf(rep, audit.Skipped, audit.ReasonOverlap); got != 5 {
						t.Errorf("%s: skipped/overlap %d, want 5 (2, 3, 5, 6, 8): %+v %+v", job, got, rep.Counts, rep.NotOK)
					}
					if got := rep.Classes[audit.Missed]; got != 0 {
						t.Errorf("%s: %d ticks missed: %+v", job, got, rep.NotOK)
					}
				}
				if got := obs.count("account"); (got > 0) != tc.counted {
					t.Errorf("account write failures counted: %d, want counted: %v", got, tc.counted)
				}

				// The next leader merges the note and deletes it.
				b := startNode(t, m, "b", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{okJob("slow", "@every 1s")}})
				time.Sleep(3 * time.Second)
				b.stop(t)
				_, byClass := stored(t, m.Control(), "slow")
				if byClass[audit.Skipped] != 5 {
					t.Errorf("after the next term the Account holds %v, want the 5 skips merged", byClass)
				}
				if st, err := audit.Load(t.Context(), m.Control(), "slow"); err != nil || len(st.Late) != 0 {
					t.Errorf("late notes left after the merge: %+v, %v", st.Late, err)
				}
			})
		})
	}
}

// TestAccount_LateNoteKeepsRuns: a term none of whose Account writes
// lands for 30 s of an every-second job ran 30 ticks, more than the
// ledger's history a reader or the next term merges (its newest 20):
// its late note holds the runs too, so that none reads as unaccounted.
func TestAccount_LateNoteKeepsRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		t0 := time.Now()
		time.Sleep(300 * time.Millisecond)
		cfg := schedulerhost.Config{Control: unwritable{m.Control(), ledger.ErrStaleTerm}, Jobs: []schedulerhost.Job{okJob("t", "@every 1s")}}
		a := startNode(t, m, "a", cfg)
		time.Sleep(30*time.Second + 200*time.Millisecond)
		to := time.Now()
		a.stop(t)
		rep := reportOf(t, a.host, "t", t0, to)
		checkSums(t, rep, 30)
		if rep.Classes[audit.Ran] != 30 {
			t.Errorf("ran %d of 30: %+v", rep.Classes[audit.Ran], rep.NotOK)
		}
	})
}

// TestAccount_RecordAfterTheLastWriteIsLoud: a run the drain abandoned
// ends after its term's last write and late notes: its record is not
// kept, and says so (counted as a late note not written), rather than
// sit unwritten in a finished term.
func TestAccount_RecordAfterTheLastWriteIsLoud(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		time.Sleep(300 * time.Millisecond)
		stubborn := schedulerhost.Job{Name: "stubborn", Schedule: "@every 1s", Overlap: schedulerhost.OverlapSkip,
			Run: func(ctx context.Context) error { time.Sleep(20 * time.Second); return nil }}
		obs := &writeFailures{}
		a := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{stubborn}, Observer: obs,
			ShutdownTimeout: time.Second, KillGrace: time.Second})
		time.Sleep(2 * time.Second)
		a.cancel()
		<-a.done // Lead returned: the run of +1 s is abandoned
		if got := obs.count("late-note"); got != 0 {
			t.Fatalf("late-note failures counted before the abandoned run ended: %d", got)
		}
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if got := obs.count("late-note"); got != 1 {
			t.Errorf("late-note failures after the abandoned run ended: %d, want 1", got)
		}
	})
}
