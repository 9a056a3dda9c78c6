package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/audit"
)

// tickMetrics are what every instance reports of the tick accounting
// (schedulerhost.Host.Audit over the last 24 h, fed by baton's runner at
// each audit poll), leader or not.
type tickMetrics struct {
	ticks       *prometheus.GaugeVec // job, class, reason
	pollErrors  prometheus.Counter
	writeErrors *prometheus.CounterVec // what: account, late-note

	mu     sync.Mutex
	series map[[3]string]bool // the job, class and reason of each series the last Ticks set
}

// tickReasons is the closed set of audit's reasons, by class: Ticks sets
// one series per job for each, 0 when none of the job's ticks has it, so
// that a rule sees a count rise from 0 (a series born at 1 has no rise).
// A reason Ticks meets beyond these gets a series while it is counted.
var tickReasons = []struct {
	class  audit.Class
	reason audit.Reason
}{
	{audit.Ran, audit.ReasonOK}, {audit.Ran, audit.ReasonFailed}, {audit.Ran, audit.ReasonTimeout}, {audit.Ran, audit.ReasonCancelled},
	{audit.Skipped, audit.ReasonPaused}, {audit.Skipped, audit.ReasonOverlap}, {audit.Skipped, audit.ReasonReload},
	{audit.Covered, audit.ReasonCatchUp},
	{audit.Missed, audit.ReasonNoLeader}, {audit.Missed, audit.ReasonClockStep}, {audit.Missed, audit.ReasonUnaccounted},
	{audit.Refused, audit.ReasonStaleTerm}, {audit.Refused, audit.ReasonDenied}, {audit.Refused, audit.ReasonClaimed}, {audit.Refused, audit.ReasonClaimFailed},
	{audit.Lost, audit.ReasonOutcomeUnknown}, {audit.Lost, audit.ReasonRetryCut}, {audit.Lost, audit.ReasonNotDelivered}, {audit.Lost, audit.ReasonTermEnded},
	{audit.Pending, audit.ReasonRunning}, {audit.Pending, audit.ReasonNotWritten},
}

func newTickMetrics(cl prometheus.Labels) *tickMetrics {
	return &tickMetrics{
		ticks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_ticks", ConstLabels: cl,
			Help: "Due ticks of the last 24 h by class and reason, from the tick accounting, as this instance last read it."},
			[]string{"job", "class", "reason"}),
		pollErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_audit_poll_errors_total", ConstLabels: cl,
			Help: "Audit polls whose read failed (accounts, terms or a job's history); baton_ticks keeps its last values."}),
		writeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_audit_write_errors_total", ConstLabels: cl,
			Help: "Writes of the tick accounting that failed: a leader's Account write (what=account: its records are asked again, or go to a late note), or a late note (what=late-note: its records are kept in memory for the instance's next term, and lost with the process)."},
			[]string{"what"}),
		series: map[[3]string]bool{},
	}
}

func (t *tickMetrics) collectors() []prometheus.Collector {
	for _, w := range []string{"account", "late-note"} {
		t.writeErrors.WithLabelValues(w) // born at 0, so that a rule sees the rise
	}
	return []prometheus.Collector{t.ticks, t.pollErrors, t.writeErrors}
}

// Ticks sets baton_ticks from one audit poll
// (schedulerhost.Host.Audit): for each job reported, one series per
// class and reason of tickReasons (and of any other reason counted),
// the job's ticks of the window with it; the series of a job no longer
// reported (a reload removed it), or of a reason beyond tickReasons no
// longer counted, are deleted. Folded ticks (Report.Folded) are in no
// series. The runner calls it after each poll that read everything; it
// does not block.
func (m *Metrics) Ticks(reps []audit.Report) {
	t := m.ticks
	t.mu.Lock()
	defer t.mu.Unlock()
	now := make(map[[3]string]float64, len(reps)*len(tickReasons))
	for _, rep := range reps {
		for _, cr := range tickReasons {
			now[[3]string{rep.Job, string(cr.class), string(cr.reason)}] = 0
		}
		for _, c := range rep.Counts {
			now[[3]string{rep.Job, string(c.Class), string(c.Reason)}] += float64(c.Ticks)
		}
	}
	for s, v := range now {
		t.ticks.WithLabelValues(s[0], s[1], s[2]).Set(v)
	}
	for s := range t.series {
		if _, ok := now[s]; !ok {
			t.ticks.DeleteLabelValues(s[0], s[1], s[2])
		}
	}
	t.series = make(map[[3]string]bool, len(now))
	for s := range now {
		t.series[s] = true
	}
}

// AuditPollFailed counts an audit poll whose read failed.
func (m *Metrics) AuditPollFailed() { m.ticks.pollErrors.Inc() }

// AccountWriteFailed implements schedulerhost.AccountObserver: it counts
// a write of the tick accounting that failed.
func (m *Metrics) AccountWriteFailed(what string) { m.ticks.writeErrors.WithLabelValues(what).Inc() }
