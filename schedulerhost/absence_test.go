package schedulerhost_test

import (
	"context"
	"errors"
	"slices"
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

// follower is a Host on m's ledger and control store that never leads.
func follower(t *testing.T, m *memory.Server, jobs ...schedulerhost.Job) *schedulerhost.Host {
	t.Helper()
	h, err := schedulerhost.New(schedulerhost.Config{Jobs: jobs, Ledger: m.Ledger(), Control: m.Control(), Instance: "follower", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// absenceOf is h's report of job at now.
func absenceOf(t *testing.T, h *schedulerhost.Host, job string, now time.Time) schedulerhost.JobAbsence {
	t.Helper()
	as, err := h.Absence(t.Context(), now)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.Job == job {
			return a
		}
	}
	t.Fatalf("Absence = %+v: no %s", as, job)
	return schedulerhost.JobAbsence{}
}

// TestAbsence_HangingRunThenOK: a follower that never led reads the
// leader's history: no T until the first tick is Deadline old; overdue
// once the tick whose run hangs is; cleared by the next run that ends
// ok; and a job without a Deadline is not reported.
func TestAbsence_HangingRunThenOK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 5 * time.Second})
		t0 := time.Now()
		release := make(chan struct{})
		var mu sync.Mutex
		calls, failing := 0, false
		jobs := []schedulerhost.Job{
			{Name: "sync", Schedule: "@every 10s", Deadline: 15 * time.Second, Run: func(ctx context.Context) error {
				mu.Lock()
				calls++
				first, fail := calls == 1, failing
				mu.Unlock()
				if first {
					<-release
				}
				if fail {
					return errors.New("broken")
				}
				return nil
			}},
			{Name: "free", Schedule: "@every 10s", Run: func(context.Context) error { return nil }},
		}
		f := follower(t, m, jobs...)
		n := startNode(t, m, "leader", schedulerhost.Config{Jobs: jobs, Control: m.Control()})
		defer n.stop(t)

		time.Sleep(24 * time.Second)
		if a := absenceOf(t, f, "sync", time.Now()); a.Overdue || !a.Due.IsZero() || a.Deadline != 15*time.Second {
			t.Errorf("at +24s (first tick +10s, not 15s old): %+v, want no T, not overdue", a)
		}
		time.Sleep(2 * time.Second) // +26s: the tick at +10s is 16s old, its run still going
		a := absenceOf(t, f, "sync", time.Now())
		if !a.Overdue || !a.Due.Equal(t0.Add(10*time.Second)) || !a.LastOKTick.IsZero() {
			t.Errorf("at +26s, the run of +10s hanging: %+v, want overdue, T = +10s, no ok run", a)
		}
		as, err := f.Absence(t.Context(), time.Now())
		if err != nil || len(as) != 1 {
			t.Errorf("Absence = %+v, %v: want the job with a Deadline only", as, err)
		}
		close(release) // the run of +10s ends ok
		time.Sleep(time.Second)
		synctest.Wait()
		a = absenceOf(t, f, "sync", time.Now())
		if a.Overdue || !a.LastOKTick.Equal(t0.Add(10*time.Second)) || a.LastOKEnded.Before(t0.Add(26*time.Second)) {
			t.Errorf("at +27s, the run of +10s ended ok: %+v, want not overdue, last ok tick +10s", a)
		}
		mu.Lock()
		failing = true // the runs of +30s on fail
		mu.Unlock()
		time.Sleep(19 * time.Second) // +46s: T = +30s, the last ok run's tick +10s
		a = absenceOf(t, f, "sync", time.Now())
		if !a.Overdue || !a.Due.Equal(t0.Add(30*time.Second)) || !a.LastOKTick.Equal(t0.Add(10*time.Second)) {
			t.Errorf("at +46s, the runs since +30s failing: %+v, want overdue, T = +30s, last ok tick +10s", a)
		}
	})
}

// TestAbsence_PausedIsNotOverdue: a job paused in the control store is
// never overdue, and says so; once resumed it is again.
func TestAbsence_PausedIsNotOverdue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 5 * time.Second})
		f := follower(t, m, schedulerhost.Job{Name: "sync", Schedule: "@every 10s", Deadline: 5 * time.Second,
			Run: func(context.Context) error { return nil }})
		jobs := control.NewJobs(m.Control())
		if err := jobs.Pause(t.Context(), control.Pause{Job: "sync", By: "test"}); err != nil {
			t.Fatal(err)
		}
		now := time.Now().Add(time.Minute) // nobody leads: every tick so far missed
		if a := absenceOf(t, f, "sync", now); a.Overdue || !a.Paused || a.Due.IsZero() {
			t.Errorf("paused: %+v, want paused, a T, not overdue", a)
		}
		if _, err := jobs.Resume(t.Context(), "sync"); err != nil {
			t.Fatal(err)
		}
		if a := absenceOf(t, f, "sync", now); !a.Overdue || a.Paused {
			t.Errorf("resumed: %+v, want overdue", a)
		}
	})
}

// TestAbsence_EveryOffsetTicksAreTheLoops: with "@every 10s offset 3s",
// T is at each moment the newest tick the leader's loop fired that is at
// least Deadline old.
func TestAbsence_EveryOffsetTicksAreTheLoops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 5 * time.Second})
		var mu sync.Mutex
		var fired []time.Time
		job := schedulerhost.Job{Name: "off", Schedule: "@every 10s offset 3s", Deadline: 4 * time.Second, Run: func(ctx context.Context) error {
			tk, _ := schedulerhost.TickFromContext(ctx)
			mu.Lock()
			fired = append(fired, tk.Time)
			mu.Unlock()
			return nil
		}}
		f := follower(t, m, job)
		n := startNode(t, m, "leader", schedulerhost.Config{Jobs: []schedulerhost.Job{job}})
		defer n.stop(t)
		for range 12 {
			time.Sleep(3700 * time.Millisecond)
			synctest.Wait()
			now := time.Now()
			mu.Lock()
			var want time.Time
			for _, tk := range fired {
				if !tk.After(now.Add(-job.Deadline)) {
					want = tk
				}
			}
			mu.Unlock()
			a := absenceOf(t, f, "off", now)
			if !a.Due.Equal(want) || a.Overdue {
				t.Errorf("at %v: T = %v, overdue %v; want the loop's tick %v, not overdue", now, a.Due, a.Overdue, want)
			}
			if !want.IsZero() && (want.Unix()%10 != 3) {
				t.Errorf("the loop fired %v: not 3s past a multiple of 10s", want)
			}
		}
		if len(fired) < 4 {
			t.Errorf("the loop fired %v", fired)
		}
	})
}

// TestAbsence_DSTTicksAreTheSchedules: in a zone's spring-forward gap,
// T is the tick the schedule gives (the loop's Next): "30 2 * * *" in New
// York ticks at 03:00 EDT on 2000-04-02, a day without 02:30.
func TestAbsence_DSTTicksAreTheSchedules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ny, err := time.LoadLocation("America/New_York")
		if err != nil {
			t.Fatal(err)
		}
		m := memory.New(election.Timing{TTL: 5 * time.Second})
		h, err := schedulerhost.New(schedulerhost.Config{Location: ny, Ledger: m.Ledger(), Instance: "f", Logger: quiet,
			Jobs: []schedulerhost.Job{{Name: "night", Schedule: "30 2 * * *", Deadline: time.Hour, Run: func(context.Context) error { return nil }}}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := schedulerhost.ParseSchedule("30 2 * * *")
		if err != nil {
			t.Fatal(err)
		}
		var ticks []time.Time // the schedule's ticks, as the loop walks them
		for tk := s.Next(time.Now().In(ny)); tk.Before(time.Date(2000, 4, 5, 0, 0, 0, 0, ny)); tk = s.Next(tk) {
			ticks = append(ticks, tk)
		}
		gap := time.Date(2000, 4, 2, 3, 0, 0, 0, ny)
		if !slices.ContainsFunc(ticks, gap.Equal) {
			t.Fatalf("the schedule has no tick at %v", gap)
		}
		for _, c := range []struct {
			now  time.Time
			want time.Time
		}{
			{time.Date(2000, 4, 2, 3, 59, 0, 0, ny), time.Date(2000, 4, 1, 2, 30, 0, 0, ny)},
			{time.Date(2000, 4, 2, 4, 0, 0, 0, ny), gap},
			{time.Date(2000, 4, 3, 3, 29, 0, 0, ny), gap},
			{time.Date(2000, 4, 3, 3, 30, 0, 0, ny), time.Date(2000, 4, 3, 2, 30, 0, 0, ny)},
		} {
			a := absenceOf(t, h, "night", c.now)
			if !a.Due.Equal(c.want) || !a.Overdue {
				t.Errorf("at %v: T = %v, overdue %v; want %v, overdue (nothing ran)", c.now, a.Due.In(ny), a.Overdue, c.want)
			}
			if !slices.ContainsFunc(ticks, a.Due.Equal) {
				t.Errorf("at %v: T = %v is no tick of the schedule", c.now, a.Due)
			}
		}
	})
}

// TestAbsence_IrregularSchedule: T is the newest tick at least Deadline
// old, also when the ticks are bunched ("0 0,1 * * *": 00:00 and 01:00).
func TestAbsence_IrregularSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := schedulerhost.New(schedulerhost.Config{Logger: quiet, Jobs: []schedulerhost.Job{
			{Name: "n", Schedule: "0 0,1 * * *", Deadline: time.Minute, Run: func(context.Context) error { return nil }}}})
		if err != nil {
			t.Fatal(err)
		}
		day := time.Now().Truncate(24 * time.Hour).Add(24 * time.Hour)
		for _, c := range []struct{ now, want time.Time }{
			{day.Add(12 * time.Hour), day.Add(time.Hour)},
			{day.Add(61 * time.Minute), day.Add(time.Hour)},
			{day.Add(60 * time.Minute), day},
			{day.Add(30 * time.Hour), day.Add(25 * time.Hour)},
		} {
			if a := absenceOf(t, h, "n", c.now); !a.Due.Equal(c.want) {
				t.Errorf("at %v: T = %v, want %v", c.now, a.Due, c.want)
			}
		}
	})
}

// TestAbsence_NegativeDeadline: refused by New, naming the job, the field
// and the value.
func TestAbsence_NegativeDeadline(t *testing.T) {
	_, err := schedulerhost.New(schedulerhost.Config{Logger: quiet, Jobs: []schedulerhost.Job{
		{Name: "sync", Schedule: "@every 1m", Deadline: -time.Minute, Run: func(context.Context) error { return nil }}}})
	want := `schedulerhost: invalid config: job "sync": Deadline -1m0s: must not be negative`
	if err == nil || err.Error() != want {
		t.Errorf("New = %v, want %s", err, want)
	}
}

// TestAbsence_OKTickOlderThanTheHistoryRead: a job whose ok run is older
// than the AbsenceHistory entries read (more ticks failed since than
// that) is not overdue when its Account holds the ok run's tick: the
// Account's newest ran-ok tick counts as the ledger's does.
func TestAbsence_OKTickOlderThanTheHistoryRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 5 * time.Second})
		t0 := time.Now()
		okUntil := t0.Add(10 * time.Second) // the ticks before +10s end ok, the later ones fail
		job := schedulerhost.Job{Name: "sync", Schedule: "@every 1s", Deadline: 30 * time.Second, Run: func(ctx context.Context) error {
			if tk, _ := schedulerhost.TickFromContext(ctx); tk.Time.Before(okUntil) {
				return nil
			}
			return errors.New("broken")
		}}
		f := follower(t, m, job)
		n := startNode(t, m, "leader", schedulerhost.Config{Jobs: []schedulerhost.Job{job}})
		time.Sleep(36500 * time.Millisecond)
		synctest.Wait()
		n.stop(t)
		now := time.Now() // T = +6s; ticks +10s to +36s, 27 of them, failed
		a := absenceOf(t, f, "sync", now)
		if !a.Due.Equal(t0.Add(6*time.Second)) || !a.Overdue || !a.LastOKTick.IsZero() {
			t.Fatalf("no Account: %+v, want T = +6s, overdue, no ok tick among the %d entries read", a, schedulerhost.AbsenceHistory)
		}
		acct := audit.Stored{Account: audit.Account{Job: "sync",
			Specs:  []audit.Spec{{At: t0, Schedule: job.Schedule, Zone: "UTC"}},
			Ranges: []audit.Range{{Class: audit.Ran, Reason: audit.ReasonOK, First: t0.Add(time.Second), Last: t0.Add(9 * time.Second), Count: 9}}}}
		if _, err := audit.Save(t.Context(), m.Control(), acct, 0); err != nil {
			t.Fatal(err)
		}
		a = absenceOf(t, f, "sync", now)
		if a.Overdue || !a.LastOKTick.Equal(t0.Add(9*time.Second)) || !a.LastOKEnded.IsZero() || a.Err != nil {
			t.Errorf("the Account holds ran ok through +9s: %+v, want not overdue, last ok tick +9s, its end unknown", a)
		}
		if a := absenceOf(t, f, "sync", t0.Add(8*time.Second)); !a.LastOKTick.IsZero() {
			t.Errorf("at +8s: last ok tick %v, want none: the Account's +9s is later", a.LastOKTick)
		}
	})
}
