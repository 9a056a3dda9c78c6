package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/batonhq/baton/audit"
)

// allZero is job's 21 series of baton_ticks, every one 0 but those of
// set ("class/reason" to count).
func allZero(job string, set map[string]int) string {
	var b strings.Builder
	for _, cr := range []string{"covered/catch-up", "lost/not-delivered", "lost/outcome-unknown", "lost/retry-cut", "lost/term-ended",
		"missed/clock-step", "missed/no-leader", "missed/unaccounted", "pending/not-written", "pending/running",
		"ran/cancelled", "ran/failed", "ran/ok", "ran/timeout", "refused/already-claimed", "refused/claim-failed", "refused/denied",
		"refused/stale-term", "skipped/overlap", "skipped/paused", "skipped/reload"} {
		c, r, _ := strings.Cut(cr, "/")
		fmt.Fprintf(&b, "baton_ticks{class=%q,election=\"orders\",job=%q,reason=%q} %d\n", c, job, r, set[cr])
	}
	return b.String()
}

// TestMetrics_Ticks: a poll sets every class and reason of each job, 0
// where none; the next poll drops the series of a job no longer reported
// and of a reason beyond the closed set no longer counted.
func TestMetrics_Ticks(t *testing.T) {
	reg, m := newMetrics(t)
	const head = `
# HELP baton_ticks Due ticks of the last 24 h by class and reason, from the tick accounting, as this instance last read it.
# TYPE baton_ticks gauge
`
	check := func(step, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "baton_ticks"); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
	check("before any poll", "")
	m.Ticks([]audit.Report{
		{Job: "report", Counts: []audit.Count{{Class: audit.Ran, Reason: audit.ReasonOK, Ticks: 1430}, {Class: audit.Missed, Reason: audit.ReasonNoLeader, Ticks: 10}}},
		{Job: "sync", Counts: []audit.Count{{Class: audit.Lost, Reason: audit.ReasonRetryCut, Ticks: 1}, {Class: audit.Missed, Reason: "future", Ticks: 2}}},
	})
	check("first poll", head+allZero("report", map[string]int{"ran/ok": 1430, "missed/no-leader": 10})+
		allZero("sync", map[string]int{"lost/retry-cut": 1})+`baton_ticks{class="missed",election="orders",job="sync",reason="future"} 2
`)
	m.Ticks([]audit.Report{{Job: "sync", Counts: []audit.Count{{Class: audit.Ran, Reason: audit.ReasonOK, Ticks: 3}}}})
	check("report gone, future no more", head+allZero("sync", map[string]int{"ran/ok": 3}))
	m.AuditPollFailed()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP baton_audit_poll_errors_total Audit polls whose read failed (accounts, terms or a job's history); baton_ticks keeps its last values.
# TYPE baton_audit_poll_errors_total counter
baton_audit_poll_errors_total{election="orders"} 1
`), "baton_audit_poll_errors_total"); err != nil {
		t.Error(err)
	}
}
