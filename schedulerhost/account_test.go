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
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// reportOf is h's audit of job after from through to.
func reportOf(t *testing.T, h *schedulerhost.Host, job string, from, to time.Time) audit.Report {
	t.Helper()
	reps, err := h.Audit(t.Context(), job, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 {
		t.Fatalf("Audit(%s) = %d reports, want 1", job, len(reps))
	}
	return reps[0]
}

// countOf is how many ticks rep counts in class c for reason why.
func countOf(rep audit.Report, c audit.Class, why audit.Reason) int64 {
	for _, n := range rep.Counts {
		if n.Class == c && n.Reason == why {
			return n.Ticks
		}
	}
	return 0
}

// checkSums fails unless rep's classes add up to its Due, which is want
// (if not negative), with no tick missed unaccounted nor pending.
func checkSums(t *testing.T, rep audit.Report, want int64) {
	t.Helper()
	var sum int64
	for _, n := range rep.Classes {
		sum += n
	}
	if sum+rep.Folded != rep.Due {
		t.Errorf("%s: classes %v add up to %d, due %d", rep.Job, rep.Classes, sum, rep.Due)
	}
	if want >= 0 && rep.Due != want {
		t.Errorf("%s: due %d, want %d", rep.Job, rep.Due, want)
	}
	if n := countOf(rep, audit.Missed, audit.ReasonUnaccounted); n != 0 {
		t.Errorf("%s: %d ticks missed, unaccounted: %+v", rep.Job, n, rep.NotOK)
	}
	if n := rep.Classes[audit.Pending]; n != 0 {
		t.Errorf("%s: %d ticks pending: %+v", rep.Job, n, rep.NotOK)
	}
}

// stored reads job's Account as stored, and counts its ticks by class.
func stored(t *testing.T, s control.Store, job string) (audit.Stored, map[audit.Class]int64) {
	t.Helper()
	st, err := audit.Load(t.Context(), s, job)
	if err != nil {
		t.Fatal(err)
	}
	n := map[audit.Class]int64{}
	for _, r := range st.Ranges {
		n[r.Class] += r.Count
	}
	return st, n
}

// putCounter counts the writes of Accounts, and fails them while fail
// is set.
type putCounter struct {
	control.Store
	mu   sync.Mutex
	puts int
	fail bool
}

func (s *putCounter) Put(ctx context.Context, p control.Put) (int64, error) {
	if strings.HasPrefix(p.Key, audit.Prefix) {
		s.mu.Lock()
		s.puts++
		fail := s.fail
		s.mu.Unlock()
		if fail {
			return 0, errors.New("store unreachable")
		}
	}
	return s.Store.Put(ctx, p)
}

func (s *putCounter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts
}

func okJob(name, schedule string) schedulerhost.Job {
	return schedulerhost.Job{Name: name, Schedule: schedule, Run: func(context.Context) error { return nil }}
}

// TestAccount_EverySecond: a leader of a job due every second for 60 s
// accounts for every tick as ran ok, in its Account (not only through
// the ledger's 20 newest entries), with one write per interval.
func TestAccount_EverySecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		t0 := time.Now()
		time.Sleep(300 * time.Millisecond) // the Host starts between ticks
		ctl := &putCounter{Store: m.Control()}
		n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, Jobs: []schedulerhost.Job{okJob("t", "@every 1s")}})
		time.Sleep(60 * time.Second)
		n.stop(t)
		to := time.Now()
		rep := reportOf(t, n.host, "t", t0, to)
		checkSums(t, rep, 60)
		if got := countOf(rep, audit.Ran, audit.ReasonOK); got != 60 {
			t.Errorf("ran ok %d, want 60: %+v", got, rep)
		}
		_, byClass := stored(t, m.Control(), "t")
		if byClass[audit.Ran] != 60 {
			t.Errorf("the Account holds %v, want 60 ran", byClass)
		}
		// 60 s: 12 intervals, and the last write.
		if p := ctl.count(); p < 2 || p > 13 {
			t.Errorf("%d writes of the Account over 60 s, want one per interval at most (13)", p)
		}
	})
}

// failover runs job on a leader that crashes at +15 s and on the node
// that takes over, then stops both at +45.3 s, and returns the audit of
// job and the memory server.
func failover(t *testing.T, job schedulerhost.Job) (audit.Report, *memory.Server) {
	t.Helper()
	t0 := time.Now()
	time.Sleep(300 * time.Millisecond)
	m := memory.New(election.Timing{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: 5 * time.Second})
	cfg := schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{job}}
	a := startNode(t, m, "a", cfg)
	b := startNode(t, m, "b", cfg)
	time.Sleep(15 * time.Second)
	a.backend.Cut()
	time.Sleep(30 * time.Second)
	a.backend.Heal()
	b.stop(t)
	a.stop(t)
	rep := reportOf(t, b.host, job.Name, t0, time.Now())
	t.Logf("due %d, %v, not ok %+v", rep.Due, rep.Counts, rep.NotOK)
	checkSums(t, rep, 45)
	return rep, m
}

// TestAccount_Failover: a leader crashes; the next one takes over with
// run-once. Within the grace the gap is covered by the catch-up run,
// which ran; beyond it the gap is missed while nobody led. Either way
// every tick is in one class, none unaccounted.
func TestAccount_Failover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{{"within grace", 30 * time.Second}, {"beyond grace", time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rep, m := failover(t, schedulerhost.Job{Name: "t", Schedule: "@every 1s",
					Misfire: schedulerhost.MisfireRunOnce, MisfireGrace: tc.grace, Run: func(context.Context) error { return nil }})
				covered, missed := rep.Classes[audit.Covered], countOf(rep, audit.Missed, audit.ReasonNoLeader)
				if covered+missed == 0 {
					t.Errorf("no gap: %+v", rep.Counts)
				}
				st, _ := stored(t, m.Control(), "t")
				ran := map[time.Time]bool{}
				for _, r := range st.Ranges {
					if r.Class == audit.Ran {
						for tk := r.First; !tk.After(r.Last); tk = tk.Add(time.Second) {
							ran[tk] = true
						}
					}
				}
				if tc.grace > 5*time.Second {
					if missed != 0 || covered == 0 {
						t.Errorf("within grace: missed %d, covered %d; want the gap covered by a catch-up run", missed, covered)
					}
					for _, r := range rep.NotOK {
						if r.Class == audit.Covered && (!r.By.Equal(r.Last.Add(time.Second)) || !ran[r.By]) {
							t.Errorf("covered range %+v: By is not the catch-up run's tick, the next, which ran", r)
						}
					}
				} else if missed == 0 {
					t.Errorf("beyond grace: no tick missed while nobody led: %+v", rep.Counts)
				}
				if rep.Classes[audit.Ran]+covered+missed != rep.Due {
					t.Errorf("ran %d + covered %d + missed %d != due %d: %+v", rep.Classes[audit.Ran], covered, missed, rep.Due, rep.Counts)
				}
			})
		})
	}
}

// TestAccount_FailoverRunAll: with run-all capped at 2, the two newest
// ticks of the gap run and the older ones are missed.
func TestAccount_FailoverRunAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rep, m := failover(t, schedulerhost.Job{Name: "t", Schedule: "@every 1s", Misfire: schedulerhost.MisfireRunAll,
			MisfireGrace: 30 * time.Second, MaxCatchUp: 2, Run: func(context.Context) error { return nil }})
		missed := countOf(rep, audit.Missed, audit.ReasonNoLeader)
		if _, byClass := stored(t, m.Control(), "t"); byClass[audit.Missed] != 3 {
			t.Errorf("the Account holds %v, want the 3 older ticks of the gap of 5 missed", byClass)
		}
		if missed != 3 || rep.Classes[audit.Covered] != 0 || rep.Classes[audit.Ran]+missed != rep.Due {
			t.Errorf("missed %d, covered %d, ran %d of %d; want the gap's older ticks missed, none covered", missed,
				rep.Classes[audit.Covered], rep.Classes[audit.Ran], rep.Due)
		}
	})
}

// TestAccount_PausedAndOverlap: a paused job's ticks are skipped/paused;
// ticks an overlong run overlaps are skipped/overlap.
func TestAccount_PausedAndOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		t0 := time.Now()
		time.Sleep(300 * time.Millisecond)
		slow := schedulerhost.Job{Name: "slow", Schedule: "@every 1s", Run: func(ctx context.Context) error {
			time.Sleep(2500 * time.Millisecond)
			return nil
		}}
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{okJob("p", "@every 1s"), slow}})
		time.Sleep(3 * time.Second)
		pauseNow(t, m.Control(), "p")
		time.Sleep(4 * time.Second)
		if _, err := control.NewJobs(m.Control()).Resume(t.Context(), "p"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3*time.Second + 200*time.Millisecond)
		to := time.Now() // ticks 1 to 10: the stop waits for slow's run
		n.stop(t)
		p := reportOf(t, n.host, "p", t0, to)
		checkSums(t, p, 10)
		if got := countOf(p, audit.Skipped, audit.ReasonPaused); got != 4 {
			t.Errorf("p: skipped/paused %d, want 4: %+v", got, p.Counts)
		}
		s := reportOf(t, n.host, "slow", t0, to)
		checkSums(t, s, 10)
		if got := countOf(s, audit.Skipped, audit.ReasonOverlap); got < 5 || got+s.Classes[audit.Ran] != 10 {
			t.Errorf("slow: skipped/overlap %d, ran %d; want about 2 of 3 skipped: %+v", got, s.Classes[audit.Ran], s.Counts)
		}
	})
}

// TestAccount_SpecChange: SetJobs changes a schedule: the ticks before
// it are due under the old one, those after under the new, each ran.
func TestAccount_SpecChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		t0 := time.Now()
		time.Sleep(300 * time.Millisecond)
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{okJob("t", "@every 1s")}})
		time.Sleep(10 * time.Second) // 10 ticks
		if _, err := n.host.SetJobs([]schedulerhost.Job{okJob("t", "@every 3s")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Second) // 30.3 s: ticks at 12, 15, ..., 30
		n.stop(t)
		rep := reportOf(t, n.host, "t", t0, time.Now())
		checkSums(t, rep, 10+7)
		if got := countOf(rep, audit.Ran, audit.ReasonOK); got != 17 {
			t.Errorf("ran ok %d, want 17: %+v", got, rep.Counts)
		}
		if len(rep.Specs) != 2 || rep.Specs[1].Old != "@every 1s" || rep.Specs[1].New != "@every 3s" {
			t.Errorf("specs %+v, want the change from @every 1s to @every 3s", rep.Specs)
		}
	})
}

// TestAccount_UnwrittenTermMerged: a leader none of whose Account writes
// landed (its process died before its last one): the next term merges
// the ledger's history into the Account, so its runs are there.
func TestAccount_UnwrittenTermMerged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		t0 := time.Now()
		time.Sleep(300 * time.Millisecond)
		lost := &putCounter{Store: m.Control(), fail: true}
		jobs := []schedulerhost.Job{okJob("t", "@every 1s")}
		a := startNode(t, m, "a", schedulerhost.Config{Control: lost, Jobs: jobs})
		time.Sleep(10 * time.Second)
		a.stop(t)
		if lost.count() == 0 {
			t.Fatal("a never tried to write its Account")
		}
		if st, _ := stored(t, m.Control(), "t"); st.Version != 0 {
			t.Fatalf("a's Account was written: %+v", st)
		}
		b := startNode(t, m, "b", schedulerhost.Config{Control: m.Control(), Jobs: jobs})
		time.Sleep(5 * time.Second)
		b.stop(t)
		st, byClass := stored(t, m.Control(), "t")
		var fromA int64
		for _, r := range st.Ranges {
			if r.Instance == "a" && r.Class == audit.Ran {
				fromA += r.Count
			}
		}
		if fromA != 10 {
			t.Errorf("the Account holds %d of a's 10 runs: %+v", fromA, st.Ranges)
		}
		rep := reportOf(t, b.host, "t", t0, time.Now())
		checkSums(t, rep, 15) // a's 10 ticks are due: its schedule is from its first run merged
		t.Logf("stored %v; report due %d %v", byClass, rep.Due, rep.Counts)
	})
}

// TestAccount_Off: with NoAccounting a leader writes no Account, reads
// none, and runs its jobs as ever.
func TestAccount_Off(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		time.Sleep(300 * time.Millisecond)
		ctl := &putCounter{Store: m.Control()}
		var rec record
		n := startNode(t, m, "a", schedulerhost.Config{Control: ctl, NoAccounting: true,
			Jobs: []schedulerhost.Job{{Name: "t", Schedule: "@every 1s", Run: rec.job("a")}}})
		time.Sleep(10 * time.Second)
		n.stop(t)
		if runs, _, _ := rec.snapshot(); len(runs) != 10 {
			t.Errorf("%d runs, want 10", len(runs))
		}
		if p := ctl.count(); p != 0 {
			t.Errorf("%d writes of Accounts with NoAccounting, want 0", p)
		}
	})
}

// TestAccount_LongGap: nobody leads for 30 h, more ticks than the
// catch-up walks (100,000): the next leader still records every one of
// them as missed, with counts that match the schedule.
func TestAccount_LongGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		t0 := time.Now()
		time.Sleep(300 * time.Millisecond)
		jobs := []schedulerhost.Job{{Name: "t", Schedule: "@every 1s", Misfire: schedulerhost.MisfireSkip,
			Run: func(context.Context) error { return nil }}}
		a := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: jobs})
		time.Sleep(5 * time.Second)
		a.stop(t)
		time.Sleep(30 * time.Hour)
		b := startNode(t, m, "b", schedulerhost.Config{Control: m.Control(), Jobs: jobs})
		time.Sleep(5 * time.Second)
		b.stop(t)
		rep := reportOf(t, b.host, "t", t0, time.Now())
		checkSums(t, rep, 5+30*3600+5)
		if got := countOf(rep, audit.Missed, audit.ReasonNoLeader); got != 30*3600 {
			t.Errorf("missed while nobody led %d, want %d: %+v", got, 30*3600, rep.Counts)
		}
		st, _ := stored(t, m.Control(), "t")
		for _, r := range st.Ranges {
			if n := int64(r.Last.Sub(r.First)/time.Second) + 1; n != r.Count {
				t.Errorf("range %v to %v holds %d ticks of the schedule, Count %d", r.First, r.Last, n, r.Count)
			}
		}
	})
}

// TestAccount_ClockStep: a forward step of the wall clock skips an hour
// of ticks over; with MisfireSkip they are missed for the clock step.
func TestAccount_ClockStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		t0 := time.Now()
		time.Sleep(300 * time.Millisecond)
		clk := schedulerhost.NewSteppingClock()
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{{Name: "t", Schedule: "@every 1s",
			Misfire: schedulerhost.MisfireSkip, Run: func(context.Context) error { return nil }}}},
			func(h *schedulerhost.Host) { h.UseClock(clk) })
		time.Sleep(3200 * time.Millisecond) // ticks +1 s to +3 s ran
		clk.Step(time.Hour)
		time.Sleep(2 * time.Second) // +4 s was due as the loop woke; +5 s to +1h4s skipped over; +1h5s ran
		to := clk.Wall()
		n.stop(t)
		rep := reportOf(t, n.host, "t", t0, to)
		checkSums(t, rep, 3605)
		if got := countOf(rep, audit.Missed, audit.ReasonClockStep); got != 3600 {
			t.Errorf("missed for the clock step %d, want 3600: %+v", got, rep.Counts)
		}
		if got := countOf(rep, audit.Ran, audit.ReasonOK); got != 5 {
			t.Errorf("ran ok %d, want 5: %+v", got, rep.Counts)
		}
	})
}

// TestAccount_ReloadAtATick: a schedule change at the very instant of a
// tick: whether the loop fires it under the old schedule or the reload
// retires it first, it is no due tick (the new schedule is in force from
// that instant, and has none then), and every due tick is accounted.
func TestAccount_ReloadAtATick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		t0 := time.Now()
		time.Sleep(300 * time.Millisecond)
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{okJob("t", "@every 2s")}})
		time.Sleep(9700 * time.Millisecond) // +10 s, a tick
		if _, err := n.host.SetJobs([]schedulerhost.Job{okJob("t", "@every 3s")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5500 * time.Millisecond) // +12 s, +15 s under the new schedule
		n.stop(t)
		rep := reportOf(t, n.host, "t", t0, time.Now())
		checkSums(t, rep, 4+2) // +2 s to +8 s, then +12 s and +15 s
		if got := countOf(rep, audit.Ran, audit.ReasonOK); got != 6 {
			t.Errorf("counts %+v, want 6 ran ok", rep.Counts)
		}
	})
}
