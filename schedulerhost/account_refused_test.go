package schedulerhost_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// TestAccount_RefusedClaims: claims the backend refuses (403) are in the
// Account as refused/denied, with the error, read alike by a follower;
// the ledger holds nothing of them.
func TestAccount_RefusedClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		t0 := time.Now()
		time.Sleep(300 * time.Millisecond)
		fl := &faultLedger{Ledger: m.Ledger(), fault: func(tick, attempt int, c ledger.Claim) (bool, error) {
			if tick >= 3 {
				return false, ledger.Refused(errForbidden)
			}
			return false, nil
		}}
		jobs := []schedulerhost.Job{okJob("t", "@every 1s")}
		n := startNode(t, m, "a", schedulerhost.Config{Ledger: fl, Control: m.Control(), Jobs: jobs})
		time.Sleep(30 * time.Second)
		n.stop(t)
		to := time.Now()
		f := follower(t, m, jobs...)
		rep := reportOf(t, f, "t", t0, to)
		checkSums(t, rep, 30)
		if got := countOf(rep, audit.Refused, audit.ReasonDenied); got != 27 {
			t.Errorf("refused/denied %d, want 27: %+v", got, rep.Counts)
		}
		for _, r := range rep.NotOK {
			if r.Class == audit.Refused && (r.Error != errForbidden.Error()[:audit.MaxError] || r.Instance != "a") {
				t.Errorf("refused range %+v: want a's error, cut to audit.MaxError", r)
			}
		}
	})
}

// mismatchStore changes an Account under its writer's feet once: right
// before the first write of job's, it writes a range of its own.
type mismatchStore struct {
	control.Store
	job  string
	once sync.Once
}

func (s *mismatchStore) Put(ctx context.Context, p control.Put) (int64, error) {
	if p.Key == audit.Key(s.job) {
		s.once.Do(func() {
			st, _ := audit.Load(ctx, s.Store, s.job)
			st.Add(audit.Range{Class: audit.Missed, Reason: audit.ReasonNoLeader, First: time.Unix(0, 0).UTC(), Last: time.Unix(0, 0).UTC(), Count: 1},
				func(t time.Time) time.Time { return t.Add(time.Second) })
			if _, err := audit.Save(ctx, s.Store, st, 0); err != nil {
				panic(err)
			}
		})
	}
	return s.Store.Put(ctx, p)
}

// TestAccount_VersionMismatch: a write that finds the Account changed
// since it was read reads it again and writes its records over the
// change, keeping both.
func TestAccount_VersionMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		time.Sleep(300 * time.Millisecond)
		ctl := &mismatchStore{Store: m.Control(), job: "t"}
		n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, Jobs: []schedulerhost.Job{okJob("t", "@every 1s")}})
		time.Sleep(12 * time.Second)
		n.stop(t)
		_, byClass := stored(t, m.Control(), "t")
		if byClass[audit.Ran] != 12 || byClass[audit.Missed] != 1 {
			t.Errorf("the Account holds %v, want 12 ran and the other writer's missed tick", byClass)
		}
	})
}

// noSettle is a ledger whose settlements (ResultUnknown) fail.
type noSettle struct{ ledger.Ledger }

func (l noSettle) Finish(ctx context.Context, rs []ledger.Run) []error {
	errs := make([]error, len(rs))
	var pass []ledger.Run
	var at []int
	for i, r := range rs {
		if r.Result == ledger.ResultUnknown {
			errs[i] = errors.New("settlement refused by the test")
			continue
		}
		pass, at = append(pass, r), append(at, i)
	}
	if len(pass) > 0 {
		for k, err := range l.Ledger.Finish(ctx, pass) {
			errs[at[k]] = err
		}
	}
	return errs
}

// TestAccount_SettledAfterTheMerge: a run of a crashed leader that
// ignores its cancellation is still running when the next term merges
// the history, and finishes later: the next term records it then.
func TestAccount_SettledAfterTheMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: 5 * time.Second})
		time.Sleep(300 * time.Millisecond)
		var first atomic.Bool
		job := schedulerhost.Job{Name: "t", Schedule: "@every 5s", Run: func(ctx context.Context) error {
			if first.CompareAndSwap(false, true) {
				time.Sleep(20 * time.Second) // the first run outlives its term
			}
			return nil
		}}
		a := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{job}})
		b := startNode(t, m, "b", schedulerhost.Config{Control: m.Control(), Ledger: noSettle{m.Ledger()}, Jobs: []schedulerhost.Job{job}})
		time.Sleep(6 * time.Second) // tick +5 s running on a
		a.backend.Cut()
		time.Sleep(34 * time.Second) // b leads from about +15 s; a's run ends at +25 s
		a.stop(t)                    // before b: a does not lead again
		a.backend.Heal()
		b.stop(t)
		st, _ := stored(t, m.Control(), "t")
		var ranA time.Time
		for _, r := range st.Ranges {
			if r.Instance == "a" && r.Class == audit.Ran && r.Reason == audit.ReasonOK {
				ranA = r.First
			}
		}
		if ranA.IsZero() || ranA.Second() != 5 {
			t.Errorf("the Account holds %+v; want a's run of +5 s, ran ok", st.Ranges)
		}
	})
}
