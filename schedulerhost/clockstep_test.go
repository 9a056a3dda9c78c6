package schedulerhost_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// misfires counts what an Observer hears about missed ticks.
type misfires struct {
	misfired atomic.Int64
	skipped  atomic.Int64
}

func (o *misfires) RunStarted(string, time.Time, time.Duration)      {}
func (o *misfires) RunFinished(string, ledger.Result, time.Duration) {}
func (o *misfires) Misfired(_ string, n int)                         { o.misfired.Add(int64(n)) }
func (o *misfires) OverlapSkipped(string)                            { o.skipped.Add(1) }
func (o *misfires) Drained(time.Duration, int)                       {}

// tickLog records each run's tick (with its CatchUp flag) and start time,
// and how many runs were going at once.
type tickLog struct {
	overlapLog
	mu    sync.Mutex
	runs  []schedulerhost.Tick
	start []time.Time
}

func (l *tickLog) job(took time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		l.overlapLog.start(ctx)
		defer l.overlapLog.end(ctx)
		tk, _ := schedulerhost.TickFromContext(ctx)
		l.mu.Lock()
		l.runs = append(l.runs, tk)
		l.start = append(l.start, time.Now())
		l.mu.Unlock()
		time.Sleep(took)
		return nil
	}
}

// offsets returns the runs' ticks as offsets from t0, in tick order, and
// the offsets of the catch-up runs.
func (l *tickLog) offsets(t0 time.Time) (all, catchUp []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.runs {
		all = append(all, r.Time.Sub(t0))
		if r.CatchUp {
			catchUp = append(catchUp, r.Time.Sub(t0))
		}
	}
	slices.Sort(all)
	slices.Sort(catchUp)
	return all, catchUp
}

func secs(s ...int) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, n := range s {
		out[i] = time.Duration(n) * time.Second
	}
	return out
}

// short prints a long list of offsets by its ends.
func short(d []time.Duration) any {
	if len(d) <= 12 {
		return d
	}
	return struct {
		N           int
		First, Last []time.Duration
	}{len(d), d[:5], d[len(d)-5:]}
}

// stepRig is a node "a" whose Host reads a SteppingClock and runs one
// job "j" every second, its runs logged in l, with an Observer counting
// misfires.
type stepRig struct {
	n     *node
	clk   *schedulerhost.SteppingClock
	l     tickLog
	obs   misfires
	t0    time.Time // the wall clock at the start
	mono0 time.Time // the process clock at the start
}

// startStepped starts a stepRig for job (its Name, Schedule and Run are
// set here), whose runs take took each.
func startStepped(t *testing.T, job schedulerhost.Job, took time.Duration) *stepRig {
	t.Helper()
	r := &stepRig{clk: schedulerhost.NewSteppingClock(), mono0: time.Now()}
	r.t0 = r.clk.Wall()
	job.Name, job.Schedule, job.Run = "j", "@every 1s", r.l.job(took)
	r.n = startNode(t, newMemory(), "a", schedulerhost.Config{Observer: &r.obs, Jobs: []schedulerhost.Job{job}},
		func(h *schedulerhost.Host) { h.UseClock(r.clk) })
	return r
}

// A forward step of the wall clock while leading: the ticks it skipped
// over are missed ticks under the job's Misfire policy (grace and cap as
// in a catch-up at term start), not replayed. With OverlapAllow the old
// loop started one run per skipped tick, all at once.
func TestHost_WallClockStepForward_IsAMisfire(t *testing.T) {
	for _, tc := range []struct {
		policy   schedulerhost.Misfire
		grace    time.Duration
		maxCatch int
		catchUp  []time.Duration // the skipped-over ticks run, as offsets from the term's start
	}{
		{schedulerhost.MisfireSkip, 0, 0, nil},
		{schedulerhost.MisfireRunOnce, 0, 0, secs(3604)},
		{schedulerhost.MisfireRunAll, 10 * time.Second, 3, secs(3602, 3603, 3604)},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rig := startStepped(t, schedulerhost.Job{Overlap: schedulerhost.OverlapAllow,
					Misfire: tc.policy, MisfireGrace: tc.grace, MaxCatchUp: tc.maxCatch}, 100*time.Millisecond)
				n, clk, l, obs, t0 := rig.n, rig.clk, &rig.l, &rig.obs, rig.t0
				time.Sleep(3500 * time.Millisecond) // ticks +1 s, +2 s, +3 s ran
				clk.Step(time.Hour)                 // the wall clock now reads +1h3.5s
				time.Sleep(2 * time.Second)         // to +5.5 s on the monotonic clock
				n.stop(t)

				all, catchUp := l.offsets(t0)
				// +4 s was due on the monotonic clock when the loop woke:
				// it runs as usual. +5 s..+1h4s were skipped over; the
				// first tick after the step, +1h5s, runs as usual.
				want := append(append(secs(1, 2, 3, 4), tc.catchUp...), secs(3605)...)
				if !slices.Equal(all, want) {
					t.Errorf("ran ticks %v, want %v", short(all), want)
				}
				if !slices.Equal(catchUp, tc.catchUp) {
					t.Errorf("catch-up runs %v, want %v", short(catchUp), tc.catchUp)
				}
				if got, want := obs.misfired.Load(), int64(3600-len(tc.catchUp)); got != want {
					t.Errorf("misfired %d ticks, want %d (3600 skipped over, %d run)", got, want, len(tc.catchUp))
				}
				l.overlapLog.mu.Lock()
				defer l.overlapLog.mu.Unlock()
				if l.maxGoing > 2 {
					t.Errorf("%d runs going at once, want at most 2 (the tick due before the step, and the catch-up runs one after another)", l.maxGoing)
				}
			})
		})
	}
}

// A backward step of the wall clock while leading: no stall and no tick
// twice. The next tick fires when the monotonic clock says it is due, as
// if the wall clock had not moved, and every tick fired is newer than the
// last one fired before. When the wall clock comes forward again to the
// schedule, nothing counts as missed.
func TestHost_WallClockStepBack_NoStallNoRepeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := startStepped(t, schedulerhost.Job{}, 0)
		n, clk, l, obs, t0, mono0 := rig.n, rig.clk, &rig.l, &rig.obs, rig.t0, rig.mono0
		time.Sleep(3500 * time.Millisecond) // ticks +1 s, +2 s, +3 s ran
		clk.Step(-time.Hour)                // the wall clock now reads -59m56.5s
		time.Sleep(3 * time.Second)         // to +6.5 s on the monotonic clock
		clk.Step(time.Hour)                 // the wall clock is right again
		time.Sleep(2 * time.Second)         // to +8.5 s
		n.stop(t)

		all, catchUp := l.offsets(t0)
		if want := secs(1, 2, 3, 4, 5, 6, 7, 8); !slices.Equal(all, want) {
			t.Errorf("ran ticks %v, want %v: each once, none stalled", short(all), want)
		}
		if len(catchUp) != 0 || obs.misfired.Load() != 0 {
			t.Errorf("catch-up runs %v, misfired %d: want none", catchUp, obs.misfired.Load())
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, r := range l.runs {
			// Started on time by the monotonic clock: tick +k s at +k s.
			if got, want := l.start[i].Sub(mono0), r.Time.Sub(t0); got != want {
				t.Errorf("tick +%v started at +%v on the monotonic clock, want +%v", want, got, want)
			}
		}
	})
}

// A forward step of years (a host whose clock was reset, synced late) on a
// per-second job: far more skipped-over ticks than the Host walks. The
// newest one still runs under run-once, and the schedule goes on from the
// new wall clock.
func TestHost_WallClockStepForward_Years(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := startStepped(t, schedulerhost.Job{Overlap: schedulerhost.OverlapAllow}, 0)
		n, clk, l, obs, t0 := rig.n, rig.clk, &rig.l, &rig.obs, rig.t0
		time.Sleep(1500 * time.Millisecond)
		const years = 10 * 365 * 24 * time.Hour
		clk.Step(years)
		time.Sleep(2 * time.Second) // to +3.5 s on the monotonic clock
		n.stop(t)
		all, catchUp := l.offsets(t0)
		if want := []time.Duration{time.Second, 2 * time.Second, years + 2*time.Second, years + 3*time.Second}; !slices.Equal(all, want) {
			t.Errorf("ran ticks %v, want %v", short(all), want)
		}
		if want := []time.Duration{years + 2*time.Second}; !slices.Equal(catchUp, want) {
			t.Errorf("catch-up runs %v, want %v", catchUp, want)
		}
		if obs.misfired.Load() < 99999 {
			t.Errorf("misfired %d ticks, want at least 99999", obs.misfired.Load())
		}
	})
}
