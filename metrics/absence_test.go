package metrics_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/batonhq/baton/schedulerhost"
)

var absenceNames = []string{"baton_job_deadline_seconds", "baton_job_last_success_timestamp_seconds", "baton_job_overdue",
	"baton_election_leaderless_seconds", "baton_absence_poll_errors_total"}

// TestMetrics_Absence: a poll sets the gauges; a job whose read failed
// keeps its values; the last success stays absent until known and keeps
// its value when the entries read hold no ok run; a job no longer
// reported loses its series; leaderless is absent until set.
func TestMetrics_Absence(t *testing.T) {
	reg, m := newMetrics(t)
	check := func(step, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), absenceNames...); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
	const head = `
# HELP baton_absence_poll_errors_total Reads of the absence poll that failed (history, pauses, accounts, leader); the gauges keep their last values.
# TYPE baton_absence_poll_errors_total counter
`
	const gauges = `
# HELP baton_job_deadline_seconds The job's Deadline: how long after a due tick a run that ended ok must stand for it.
# TYPE baton_job_deadline_seconds gauge
# HELP baton_job_overdue 1 while the latest due tick at least Deadline old has no run that ended ok, else 0.
# TYPE baton_job_overdue gauge
`
	const last = `
# HELP baton_job_last_success_timestamp_seconds End of the job's newest run that ended ok, as this instance last read the ledger (Unix seconds).
# TYPE baton_job_last_success_timestamp_seconds gauge
`
	check("before any poll", head+`baton_absence_poll_errors_total{election="orders"} 0
`)
	ended := time.Unix(1700000000, 500000000)
	m.Absence([]schedulerhost.JobAbsence{
		{Job: "a", Deadline: time.Minute, Overdue: true},
		{Job: "b", Deadline: 90 * time.Second, LastOKTick: ended.Add(-time.Second), LastOKEnded: ended},
	})
	check("first poll", head+`baton_absence_poll_errors_total{election="orders"} 0
`+gauges+`baton_job_deadline_seconds{election="orders",job="a"} 60
baton_job_deadline_seconds{election="orders",job="b"} 90
baton_job_overdue{election="orders",job="a"} 1
baton_job_overdue{election="orders",job="b"} 0
`+last+`baton_job_last_success_timestamp_seconds{election="orders",job="b"} 1.7000000005e+09
`)
	m.Absence([]schedulerhost.JobAbsence{
		{Job: "b", Deadline: 90 * time.Second, Overdue: true}, // no ok run among the entries read
		{Job: "a", Deadline: time.Minute, Err: errors.New("read failed")},
	})
	m.AbsencePollFailed(1)
	m.Leaderless(0)
	check("second poll", head+`baton_absence_poll_errors_total{election="orders"} 1
`+gauges+`baton_job_deadline_seconds{election="orders",job="a"} 60
baton_job_deadline_seconds{election="orders",job="b"} 90
baton_job_overdue{election="orders",job="a"} 1
baton_job_overdue{election="orders",job="b"} 1
`+last+`baton_job_last_success_timestamp_seconds{election="orders",job="b"} 1.7000000005e+09
# HELP baton_election_leaderless_seconds While nobody leads, time since this instance's last poll that saw a leader (at most one poll interval more than nobody has led); 0 while someone leads.
# TYPE baton_election_leaderless_seconds gauge
baton_election_leaderless_seconds{election="orders"} 0
`)
	m.Absence([]schedulerhost.JobAbsence{{Job: "a", Deadline: time.Minute}})
	m.Leaderless(2500 * time.Millisecond)
	check("b gone", head+`baton_absence_poll_errors_total{election="orders"} 1
`+gauges+`baton_job_deadline_seconds{election="orders",job="a"} 60
baton_job_overdue{election="orders",job="a"} 0
# HELP baton_election_leaderless_seconds While nobody leads, time since this instance's last poll that saw a leader (at most one poll interval more than nobody has led); 0 while someone leads.
# TYPE baton_election_leaderless_seconds gauge
baton_election_leaderless_seconds{election="orders"} 2.5
`)
}
