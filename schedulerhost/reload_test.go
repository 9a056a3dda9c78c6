package schedulerhost_test

// Tests of Host.SetJobs (reload.go): a new job set while leading, in the
// same term.

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// job is a Run that records its runs in l (see schedule_test.go).
func (l *runLog) job(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		tk, _ := schedulerhost.TickFromContext(ctx)
		tok, _ := election.TokenFromContext(ctx)
		l.mu.Lock()
		l.runs = append(l.runs, loggedRun{job: name, tick: tk.Time, token: tok, at: time.Now()})
		l.mu.Unlock()
		return nil
	}
}

func jobNames(st []schedulerhost.JobStatus) []string {
	var out []string
	for _, s := range st {
		out = append(out, s.Name)
	}
	return out
}

func term(t *testing.T, n *node) uint64 {
	t.Helper()
	ti, ok := n.elector.Term()
	if !ok {
		t.Fatal("not leading")
	}
	return ti.Token
}

// TestHost_SetJobs_WhileLeading: a job added while leading runs from its
// first tick after the reload (none before), a removed one stops, a
// changed schedule takes effect at once, an unchanged job keeps its ticks,
// all in the same term (same token).
func TestHost_SetJobs_WhileLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var l runLog
		unchanged := schedulerhost.Job{Name: "keep", Schedule: "@every 1s", Run: l.job("keep")}
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: []schedulerhost.Job{
			{Name: "old", Schedule: "@every 1s", Run: l.job("old")},
			unchanged,
			{Name: "slow", Schedule: "@every 10s", Run: l.job("slow")},
		}})
		tok := term(t, n)
		time.Sleep(3500 * time.Millisecond)
		reloadAt := time.Now()
		unchanged.Run = l.job("keep") // a new function, same settings
		ch, err := n.host.SetJobs([]schedulerhost.Job{
			unchanged,
			{Name: "new", Schedule: "@every 2s", Run: l.job("new")},
			{Name: "slow", Schedule: "@every 1s", Run: l.job("slow")},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := schedulerhost.JobChanges{Added: []string{"new"}, Removed: []string{"old"}, Changed: []string{"slow"}, Unchanged: []string{"keep"}}
		if !slices.Equal(ch.Added, want.Added) || !slices.Equal(ch.Removed, want.Removed) ||
			!slices.Equal(ch.Changed, want.Changed) || !slices.Equal(ch.Unchanged, want.Unchanged) {
			t.Errorf("changes = %+v, want %+v", ch, want)
		}
		if got := jobNames(n.host.Status()); !slices.Equal(got, []string{"keep", "new", "slow"}) {
			t.Errorf("Status jobs = %v, want keep, new, slow", got)
		}
		time.Sleep(5 * time.Second)
		if got := term(t, n); got != tok {
			t.Errorf("token %d after the reload, want %d (no new term)", got, tok)
		}

		for _, r := range l.of("old") {
			if r.at.After(reloadAt) {
				t.Errorf("removed job ran at %v, after the reload at %v", r.at, reloadAt)
			}
		}
		if len(l.of("old")) != 3 {
			t.Errorf("old ran %d times before the reload, want 3", len(l.of("old")))
		}
		// The added job's first tick is its schedule's first after the
		// reload (the next whole multiple of 2 s since the epoch: 4 s),
		// none before.
		first := func(spec string) time.Time {
			s, err := schedulerhost.ParseSchedule(spec)
			if err != nil {
				t.Fatal(err)
			}
			return s.Next(reloadAt)
		}
		nw := l.of("new")
		if len(nw) != 3 || !nw[0].tick.Equal(first("@every 2s")) || !nw[0].tick.After(reloadAt) {
			t.Errorf("new ran at ticks %v, want 3 runs from %v", nw, first("@every 2s"))
		}
		// The unchanged job goes on every second, no tick lost or repeated.
		keep := l.of("keep")
		if len(keep) != 8 {
			t.Errorf("keep ran %d times in 8.5 s, want 8", len(keep))
		}
		for i := 1; i < len(keep); i++ {
			if d := keep[i].tick.Sub(keep[i-1].tick); d != time.Second {
				t.Errorf("keep: ticks %v then %v", keep[i-1].tick, keep[i].tick)
			}
		}
		// The changed job runs every second from the reload on; it had not
		// run before (its first 10 s tick was still to come).
		slow := l.of("slow")
		if len(slow) != 5 || !slow[0].tick.Equal(first("@every 1s")) {
			t.Errorf("slow ran at ticks %v, want 5 runs from %v", slow, first("@every 1s"))
		}
		for _, r := range append(append(keep, nw...), slow...) {
			if r.token != tok {
				t.Errorf("%s ran with token %d, want %d", r.job, r.token, tok)
			}
		}
		n.stop(t)
	})
}

// TestHost_SetJobs_RemovedRunDrains: a removed job's run in flight is not
// cancelled; Status shows it as removed while it goes; it is recorded as
// usual, and a graceful stop waits for it.
func TestHost_SetJobs_RemovedRunDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var l runLog
		var cancelled sync.Once
		sawCancel := false
		n := startNode(t, m, "a", schedulerhost.Config{ShutdownTimeout: time.Minute, Jobs: []schedulerhost.Job{
			{Name: "slow", Schedule: "@every 1s", Run: func(ctx context.Context) error {
				_ = l.job("slow")(ctx)
				select {
				case <-time.After(5 * time.Second):
				case <-ctx.Done():
					cancelled.Do(func() { sawCancel = true })
				}
				return nil
			}},
			{Name: "keep", Schedule: "@every 1s", Run: l.job("keep")},
		}})
		time.Sleep(1500 * time.Millisecond) // slow's run started at 1 s
		if _, err := n.host.SetJobs([]schedulerhost.Job{{Name: "keep", Schedule: "@every 1s", Run: l.job("keep")}}); err != nil {
			t.Fatal(err)
		}
		st := n.host.Status()
		if len(st) != 2 || st[0].Name != "keep" || st[1].Name != "slow" || !st[1].Removed || st[1].Running != 1 {
			t.Errorf("Status while the removed job's run goes: %+v", st)
		}
		if n.host.Running() != 1 {
			t.Errorf("Running = %d, want 1", n.host.Running())
		}
		time.Sleep(time.Second)
		n.cancel() // the drain waits for the removed job's run
		stopAt := time.Now()
		if err := <-n.done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := time.Since(stopAt); got != 3500*time.Millisecond {
			t.Errorf("the stop took %v, want 3.5 s (the removed job's run ends at 6 s)", got)
		}
		if sawCancel {
			t.Error("the removed job's run was cancelled")
		}
		if got := len(l.of("slow")); got != 1 {
			t.Errorf("slow started %d times, want 1", got)
		}
		h := history(t, m, "slow")
		if len(h) != 1 || h[0].Result != ledger.ResultOK {
			t.Errorf("slow's history: %+v, want one ok run", h)
		}
		if got := jobNames(n.host.Status()); !slices.Equal(got, []string{"keep"}) {
			t.Errorf("Status once the run returned: %v, want keep only", got)
		}
	})
}

// TestHost_SetJobs_BadSetRefused: an invalid set is refused with the
// errors New gives, and the old set keeps running unchanged.
func TestHost_SetJobs_BadSetRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var l runLog
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "a", Schedule: "@every 1s", Run: l.job("a")}}})
		time.Sleep(1500 * time.Millisecond)
		bad := []schedulerhost.Job{
			{Name: "b", Schedule: "@every 1s", Run: l.job("b")},
			{Name: "c", Schedule: "61 * * * *", Run: l.job("c")},
			{Name: "b", Schedule: "@every 1s"},
		}
		_, err := n.host.SetJobs(bad)
		_, newErr := schedulerhost.New(schedulerhost.Config{Jobs: bad, Ledger: m.Ledger(), Instance: "a"})
		if err == nil || newErr == nil || err.Error() != newErr.Error() {
			t.Fatalf("SetJobs error:\n%v\nwant New's:\n%v", err, newErr)
		}
		for _, want := range []string{`job "c": Schedule "61 * * * *"`, `job "b": Name "b": duplicate`, `job "b": Run: required`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q:\n%v", want, err)
			}
		}
		if _, err := n.host.SetJobs(nil); err == nil {
			t.Error("SetJobs(nil): no error, want at least one job required")
		}
		time.Sleep(3 * time.Second)
		if got := len(l.of("a")); got != 4 {
			t.Errorf("a ran %d times in 4.5 s, want 4: the old set keeps ticking", got)
		}
		if len(l.of("b")) != 0 {
			t.Error("b of the refused set ran")
		}
		if got := jobNames(n.host.Status()); !slices.Equal(got, []string{"a"}) {
			t.Errorf("Status jobs = %v, want a", got)
		}
		n.stop(t)
	})
}

// TestHost_SetJobs_BetweenTerms: a set given while not leading is the one
// the next term runs.
func TestHost_SetJobs_BetweenTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l runLog
		h, err := schedulerhost.New(schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "a", Schedule: "@every 1s", Run: l.job("a")}}, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.SetJobs([]schedulerhost.Job{{Name: "b", Schedule: "@every 1s", Run: l.job("b")}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Lead(ctx, election.NewTerm(context.Background(), 3)) }()
		time.Sleep(2500 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(l.of("a")) != 0 || len(l.of("b")) != 2 {
			t.Errorf("runs: a %d, b %d; want 0 and 2", len(l.of("a")), len(l.of("b")))
		}
	})
}

// TestHost_SetJobs_ChangedJobsRunInFlight: a job changed while a run of it
// goes: the run goes on, uncancelled, and still counts for the overlap
// policy; the next ticks run the new function.
func TestHost_SetJobs_ChangedJobsRunInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var l runLog
		oldCancelled := false
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "w", Schedule: "@every 1s",
			Run: func(ctx context.Context) error {
				_ = l.job("old")(ctx)
				select {
				case <-time.After(2500 * time.Millisecond):
				case <-ctx.Done():
					oldCancelled = true
				}
				return nil
			}}}})
		time.Sleep(1500 * time.Millisecond) // the run of tick 1 s goes until 3.5 s
		ch, err := n.host.SetJobs([]schedulerhost.Job{{Name: "w", Schedule: "@every 1s", Timeout: time.Minute, Run: l.job("new")}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ch.Changed, []string{"w"}) {
			t.Errorf("changes = %+v, want w changed", ch)
		}
		time.Sleep(4 * time.Second)
		n.stop(t)
		if oldCancelled {
			t.Error("the run in flight was cancelled")
		}
		var ticks []time.Time
		for _, r := range l.of("new") {
			ticks = append(ticks, r.tick)
		}
		// Ticks 2 s and 3 s overlap the old run: skipped. 4 s and 5 s run.
		t0 := l.of("old")[0].tick
		if len(l.of("old")) != 1 || len(ticks) != 2 || !ticks[0].Equal(t0.Add(3*time.Second)) {
			t.Errorf("old runs %v, new runs at %v; want 1 old, new from %v", l.of("old"), ticks, t0.Add(3*time.Second))
		}
		if st := n.host.Status(); len(st) != 1 || st[0].Skipped != 2 {
			t.Errorf("Status: %+v, want w with 2 skipped", st)
		}
	})
}

// TestHost_SetJobs_QueuedTicksKeepTheirVersion: with OverlapQueue, a tick
// queued before the reload runs with the old function, one queued after
// it with the new one, in tick order.
func TestHost_SetJobs_QueuedTicksKeepTheirVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var l runLog
		slow := func(name string) func(context.Context) error {
			return func(ctx context.Context) error {
				_ = l.job(name)(ctx)
				time.Sleep(2500 * time.Millisecond)
				return nil
			}
		}
		n := startNode(t, m, "a", schedulerhost.Config{ShutdownTimeout: time.Minute, Jobs: []schedulerhost.Job{
			{Name: "q", Schedule: "@every 1s", Overlap: schedulerhost.OverlapQueue, Run: slow("old")}}})
		time.Sleep(2500 * time.Millisecond) // tick 1 s runs, tick 2 s is queued
		if _, err := n.host.SetJobs([]schedulerhost.Job{{Name: "q", Schedule: "@every 1s", Overlap: schedulerhost.OverlapQueue, Run: slow("new")}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * time.Second)
		n.stop(t)
		var old, nw []time.Time
		for _, r := range l.of("old") {
			old = append(old, r.tick)
		}
		for _, r := range l.of("new") {
			nw = append(nw, r.tick)
		}
		if len(old) != 2 || len(nw) < 1 || old[1].Sub(old[0]) != time.Second || nw[0].Sub(old[1]) != time.Second {
			t.Errorf("old function ran ticks %v, new %v; want the first two with the old, from the third on with the new", old, nw)
		}
	})
}
