package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/schedulerhost"
)

// absenceMetrics are what every instance reports of the jobs' deadlines
// and of the leadership, leader or not (schedulerhost.Host.Absence, fed by
// baton's runner at each absence poll).
type absenceMetrics struct {
	deadline    *prometheus.GaugeVec
	lastSuccess *prometheus.GaugeVec
	overdue     *prometheus.GaugeVec
	leaderless  *prometheus.GaugeVec // no labels: absent until the first Leaderless
	pollErrors  prometheus.Counter

	mu   sync.Mutex
	jobs map[string]bool // the jobs the last Absence reported
}

func newAbsenceMetrics(cl prometheus.Labels) *absenceMetrics {
	return &absenceMetrics{
		deadline: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_job_deadline_seconds", ConstLabels: cl,
			Help: "The job's Deadline: how long after a due tick a run that ended ok must stand for it."}, []string{"job"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_job_last_success_timestamp_seconds", ConstLabels: cl,
			Help: "End of the job's newest run that ended ok, as this instance last read the ledger (Unix seconds)."}, []string{"job"}),
		overdue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_job_overdue", ConstLabels: cl,
			Help: "1 while the latest due tick at least Deadline old has no run that ended ok, else 0."}, []string{"job"}),
		leaderless: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_election_leaderless_seconds", ConstLabels: cl,
			Help: "While nobody leads, time since this instance's last poll that saw a leader (at most one poll interval more than nobody has led); 0 while someone leads."}, nil),
		pollErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_absence_poll_errors_total", ConstLabels: cl,
			Help: "Reads of the absence poll that failed (history, pauses, accounts, leader); the gauges keep their last values."}),
		jobs: map[string]bool{},
	}
}

func (a *absenceMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{a.deadline, a.lastSuccess, a.overdue, a.leaderless, a.pollErrors}
}

// Absence sets the jobs' deadline gauges from one poll of
// schedulerhost.Host.Absence: a job whose read failed (Err) keeps its
// last overdue and last success values; a job with no ok run among the
// entries read keeps its last success value (absent until one is
// known); the series of a job no longer reported (removed, or its
// Deadline taken away, by a reload) are deleted. The runner calls it
// after each poll; it does not block.
func (m *Metrics) Absence(jobs []schedulerhost.JobAbsence) {
	a := m.absence
	a.mu.Lock()
	defer a.mu.Unlock()
	now := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		now[j.Job] = true
		a.deadline.WithLabelValues(j.Job).Set(j.Deadline.Seconds())
		if j.Err != nil {
			continue
		}
		if !j.LastOKEnded.IsZero() {
			a.lastSuccess.WithLabelValues(j.Job).Set(float64(j.LastOKEnded.UnixNano()) / 1e9)
		}
		v := 0.0
		if j.Overdue {
			v = 1
		}
		a.overdue.WithLabelValues(j.Job).Set(v)
	}
	for job := range a.jobs {
		if !now[job] {
			a.deadline.DeleteLabelValues(job)
			a.lastSuccess.DeleteLabelValues(job)
			a.overdue.DeleteLabelValues(job)
		}
	}
	a.jobs = now
}

// AbsencePollFailed counts n failed reads of an absence poll.
func (m *Metrics) AbsencePollFailed(n int) { m.absence.pollErrors.Add(float64(n)) }

// Leaderless sets baton_election_leaderless_seconds: how long this
// instance's polls have seen nobody lead (0 while someone leads). The
// series is absent until the first call: the runner makes none for a
// backend that cannot say who leads.
func (m *Metrics) Leaderless(d time.Duration) {
	m.absence.leaderless.WithLabelValues().Set(max(d, 0).Seconds())
}
