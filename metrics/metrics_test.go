package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/schedulerhost"
)

func TestMetrics_FollowATerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, m := newMetrics(t)
		store := memory.New(election.Timing{TTL: 5 * time.Second})
		e, _ := election.New(election.Config{Backend: store.Candidate(), Identity: election.Identity{ID: "a"}, Observer: m, Logger: quiet})
		h, err := schedulerhost.New(schedulerhost.Config{Observer: m, Logger: quiet, Jobs: []schedulerhost.Job{
			{Name: "ok", Schedule: "@every 1s", Run: func(context.Context) error { return nil }},
			{Name: "slow", Schedule: "@every 1s", Run: func(context.Context) error { time.Sleep(1500 * time.Millisecond); return nil }},
		}})
		if err != nil {
			t.Fatal(err)
		}
		stop := leadFor(e, h, 3500*time.Millisecond)
		if got := testutil.ToFloat64(m.Leader()); got != 1 {
			t.Errorf("baton_leader = %v while leading, want 1", got)
		}
		stop()
		want := `
# HELP baton_job_runs_total Job runs finished on this instance, by job and result.
# TYPE baton_job_runs_total counter
baton_job_runs_total{election="orders",job="ok",result="ok"} 3
baton_job_runs_total{election="orders",job="slow",result="ok"} 2
# HELP baton_job_overlap_skipped_total Ticks skipped because a previous run was still going.
# TYPE baton_job_overlap_skipped_total counter
baton_job_overlap_skipped_total{election="orders",job="slow"} 1
# HELP baton_leader 1 while this instance holds a live term, else 0.
# TYPE baton_leader gauge
baton_leader{election="orders"} 0
# HELP baton_leadership_ended_total Terms this instance ended, by how: released or lost.
# TYPE baton_leadership_ended_total counter
baton_leadership_ended_total{election="orders",how="lost"} 0
baton_leadership_ended_total{election="orders",how="released"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "baton_job_runs_total", "baton_job_overlap_skipped_total", "baton_leader", "baton_leadership_ended_total"); err != nil {
			t.Error(err)
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP baton_term_token Fencing token of this instance's current or last term.
# TYPE baton_term_token gauge
baton_term_token{election="orders"} 1
`), "baton_term_token"); err != nil {
			t.Error(err)
		}
	})
}

// TestMetrics_Retries: each retry of a run counts once in
// baton_job_retries_total; the run counts once in baton_job_runs_total.
func TestMetrics_Retries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, m := newMetrics(t)
		calls := 0
		h, err := schedulerhost.New(schedulerhost.Config{Observer: m, Logger: quiet, Jobs: []schedulerhost.Job{
			{Name: "flaky", Schedule: "0 * * * * *", Retries: 3, RetryBackoff: time.Second, Run: func(context.Context) error {
				if calls++; calls < 3 {
					return context.DeadlineExceeded
				}
				return nil
			}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := h.Lead(ctx, election.NewTerm(context.Background(), 1)); err != nil {
			t.Fatal(err)
		}
		want := `
# HELP baton_job_retries_total Attempts of job runs after a failed attempt (Retries), on this instance.
# TYPE baton_job_retries_total counter
baton_job_retries_total{election="orders",job="flaky"} 2
# HELP baton_job_runs_total Job runs finished on this instance, by job and result.
# TYPE baton_job_runs_total counter
baton_job_runs_total{election="orders",job="flaky",result="ok"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "baton_job_retries_total", "baton_job_runs_total"); err != nil {
			t.Error(err)
		}
	})
}

// The controls' metrics: a paused job's skips by reason, the paused jobs,
// run-now runs by result.
func TestMetrics_Controls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, m := newMetrics(t)
		store := memory.New(election.Timing{TTL: 5 * time.Second})
		jobs := control.NewJobs(store.Control())
		if err := jobs.Pause(t.Context(), control.Pause{Job: "p", By: "alice", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := jobs.RequestRun(t.Context(), control.RunRequest{ID: "r1", Job: "once", By: "bob", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		e, _ := election.New(election.Config{Backend: store.Candidate(), Identity: election.Identity{ID: "a"}, Observer: m, Logger: quiet})
		h, err := schedulerhost.New(schedulerhost.Config{Observer: m, Logger: quiet, Ledger: store.Ledger(), Control: store.Control(), Instance: "a",
			Jobs: []schedulerhost.Job{
				{Name: "p", Schedule: "@every 1s", Run: func(context.Context) error { return nil }},
				{Name: "once", Schedule: "0 0 0 1 1 *", Run: func(context.Context) error { return nil }},
			}})
		if err != nil {
			t.Fatal(err)
		}
		leadFor(e, h, 3500*time.Millisecond)()
		want := `
# HELP baton_job_skips_total Ticks not run on purpose, by job and reason: paused, overlap.
# TYPE baton_job_skips_total counter
baton_job_skips_total{election="orders",job="p",reason="paused"} 3
# HELP baton_jobs_paused Jobs paused, as this instance last read them while leading.
# TYPE baton_jobs_paused gauge
baton_jobs_paused{election="orders"} 1
# HELP baton_manual_runs_total Run-now runs finished on this instance, by job and result.
# TYPE baton_manual_runs_total counter
baton_manual_runs_total{election="orders",job="once",result="ok"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "baton_job_skips_total", "baton_jobs_paused", "baton_manual_runs_total"); err != nil {
			t.Error(err)
		}
	})
}

// newMetrics registers election "orders"'s metrics in a registry of
// their own.
func newMetrics(t *testing.T) (*prometheus.Registry, *metrics.Metrics) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg, "orders")
	if err != nil {
		t.Fatal(err)
	}
	return reg, m
}

// quiet discards what it logs.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// leadFor runs e, leading with h, for d and returns stop, which ends the
// run and waits for it.
func leadFor(e *election.Elector, h *schedulerhost.Host, d time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx, h.Lead) }()
	time.Sleep(d)
	return func() {
		cancel()
		<-done
	}
}
