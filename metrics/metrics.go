// Package metrics exposes an Elector's and a Host's state as Prometheus
// metrics, on a registry the embedding service passes in (no global
// state).
//
//	m, err := metrics.New(reg, "orders")
//	election.New(election.Config{..., Observer: m})
//	schedulerhost.New(schedulerhost.Config{..., Observer: m})
package metrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// Metrics implements election.Observer and schedulerhost.Observer. Its
// methods are safe for concurrent use and do not block.
type Metrics struct {
	leader        prometheus.Gauge
	token         prometheus.Gauge
	elected       prometheus.Counter
	termsEnded    *prometheus.CounterVec
	acquireErrors prometheus.Counter
	runs          *prometheus.CounterVec
	retries       *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	lateness      *prometheus.HistogramVec
	misfires      *prometheus.CounterVec
	skipped       *prometheus.CounterVec
	running       *prometheus.GaugeVec
	drain         prometheus.Histogram
	abandoned     prometheus.Counter
	skips         *prometheus.CounterVec
	manual        *prometheus.CounterVec
	paused        prometheus.Gauge

	claims  claimMetrics    // claims.go
	absence *absenceMetrics // absence.go
	ticks   *tickMetrics    // ticks.go
}

var (
	_ election.Observer           = (*Metrics)(nil)
	_ schedulerhost.Observer      = (*Metrics)(nil)
	_ schedulerhost.RetryObserver = (*Metrics)(nil)

	_ schedulerhost.ControlObserver = (*Metrics)(nil)
	_ schedulerhost.ContextObserver = (*Metrics)(nil)
)

// New creates the metrics, labelled with the election's name, and
// registers them with reg. It fails if reg already has them.
func New(reg prometheus.Registerer, electionName string) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil registerer")
	}
	cl := prometheus.Labels{"election": electionName}
	m := &Metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_leader", ConstLabels: cl,
			Help: "1 while this instance holds a live term, else 0."}),
		token: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_term_token", ConstLabels: cl,
			Help: "Fencing token of this instance's current or last term."}),
		elected: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_leadership_acquired_total", ConstLabels: cl,
			Help: "Terms this instance began."}),
		termsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_leadership_ended_total", ConstLabels: cl,
			Help: "Terms this instance ended, by how: released or lost."}, []string{"how"}),
		acquireErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_acquire_errors_total", ConstLabels: cl,
			Help: "Attempts to take the lease that failed, each one, retried inside Acquire or returned by it."}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_job_runs_total", ConstLabels: cl,
			Help: "Job runs finished on this instance, by job and result."}, []string{"job", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_job_retries_total", ConstLabels: cl,
			Help: "Attempts of job runs after a failed attempt (Retries), on this instance."}, []string{"job"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_job_run_duration_seconds", ConstLabels: cl,
			Help: "Duration of job runs.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"job"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_job_lateness_seconds", ConstLabels: cl,
			Help: "Run start minus the tick's nominal time.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"job"}),
		misfires: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_job_misfires_total", ConstLabels: cl,
			Help: "Ticks not run: missed during a failover beyond the misfire policy, or a failed claim."}, []string{"job"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_job_overlap_skipped_total", ConstLabels: cl,
			Help: "Ticks skipped because a previous run was still going."}, []string{"job"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_job_running", ConstLabels: cl,
			Help: "Runs in flight on this instance."}, []string{"job"}),
		drain: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_drain_duration_seconds", ConstLabels: cl,
			Help: "Time from the end of a term to its runs having returned (or the drain giving up).", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_drain_abandoned_runs_total", ConstLabels: cl,
			Help: "Runs still going when a drain gave up."}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_job_skips_total", ConstLabels: cl,
			Help: "Ticks not run on purpose, by job and reason: paused, overlap."}, []string{"job", "reason"}),
		manual: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_manual_runs_total", ConstLabels: cl,
			Help: "Run-now runs finished on this instance, by job and result."}, []string{"job", "result"}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_jobs_paused", ConstLabels: cl,
			Help: "Jobs paused, as this instance last read them while leading."}),
	}
	m.claims = newClaimMetrics(cl)
	m.absence = newAbsenceMetrics(cl)
	m.ticks = newTickMetrics(cl)
	for _, c := range slices.Concat([]prometheus.Collector{m.leader, m.token, m.elected, m.termsEnded, m.acquireErrors, m.runs, m.retries,
		m.duration, m.lateness, m.misfires, m.skipped, m.running, m.drain, m.abandoned, m.skips, m.manual, m.paused, m.claims.refused},
		m.absence.collectors(), m.ticks.collectors()) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	m.termsEnded.WithLabelValues("released")
	m.termsEnded.WithLabelValues("lost")
	return m, nil
}

// AcquireFailed implements election.Observer.
func (m *Metrics) AcquireFailed(error) { m.acquireErrors.Inc() }

// Elected implements election.Observer.
func (m *Metrics) Elected(token uint64) {
	m.leader.Set(1)
	m.token.Set(float64(token))
	m.elected.Inc()
}

// TermEnded implements election.Observer.
func (m *Metrics) TermEnded(token uint64, held time.Duration, lost bool) {
	m.leader.Set(0)
	how := "released"
	if lost {
		how = "lost"
	}
	m.termsEnded.WithLabelValues(how).Inc()
}

// RunStarted implements schedulerhost.Observer.
func (m *Metrics) RunStarted(job string, tick time.Time, lateness time.Duration) {
	m.running.WithLabelValues(job).Inc()
	m.lateness.WithLabelValues(job).Observe(max(lateness, 0).Seconds())
}

// RunStartedContext implements schedulerhost.ContextObserver: RunStarted,
// with the run's trace, when it is traced and sampled
// (schedulerhost.TraceIDFromContext), as the exemplar trace_id of the
// lateness observation (shown in the OpenMetrics format only).
func (m *Metrics) RunStartedContext(ctx context.Context, job string, tick time.Time, lateness time.Duration) {
	id := schedulerhost.TraceIDFromContext(ctx)
	if id == "" {
		m.RunStarted(job, tick, lateness)
		return
	}
	m.running.WithLabelValues(job).Inc()
	m.lateness.WithLabelValues(job).(prometheus.ExemplarObserver).ObserveWithExemplar(max(lateness, 0).Seconds(), prometheus.Labels{"trace_id": id})
}

// RunFinished implements schedulerhost.Observer.
func (m *Metrics) RunFinished(job string, result ledger.Result, took time.Duration) {
	m.running.WithLabelValues(job).Dec()
	m.runs.WithLabelValues(job, string(result)).Inc()
	m.duration.WithLabelValues(job).Observe(took.Seconds())
}

// RunRetried implements schedulerhost.RetryObserver.
func (m *Metrics) RunRetried(job string, attempt int) { m.retries.WithLabelValues(job).Inc() }

// Misfired implements schedulerhost.Observer.
func (m *Metrics) Misfired(job string, ticks int) {
	m.misfires.WithLabelValues(job).Add(float64(ticks))
}

// OverlapSkipped implements schedulerhost.Observer.
func (m *Metrics) OverlapSkipped(job string) {
	m.skipped.WithLabelValues(job).Inc()
	m.skips.WithLabelValues(job, "overlap").Inc()
}

// TickSkipped implements schedulerhost.ControlObserver.
func (m *Metrics) TickSkipped(job, reason string) { m.skips.WithLabelValues(job, reason).Inc() }

// ManualRunFinished implements schedulerhost.ControlObserver.
func (m *Metrics) ManualRunFinished(job string, result ledger.Result) {
	m.manual.WithLabelValues(job, string(result)).Inc()
}

// PausedJobs implements schedulerhost.ControlObserver.
func (m *Metrics) PausedJobs(n int) { m.paused.Set(float64(n)) }

// Drained implements schedulerhost.Observer.
func (m *Metrics) Drained(took time.Duration, left int) {
	m.drain.Observe(took.Seconds())
	m.abandoned.Add(float64(left))
}

// Leader returns the leader gauge, for tests and custom exposition.
func (m *Metrics) Leader() prometheus.Gauge { return m.leader }
