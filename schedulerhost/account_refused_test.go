package schedulerhost_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/control"
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
