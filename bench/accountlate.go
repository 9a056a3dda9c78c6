package main

import (
	"time"

	"github.com/batonhq/baton/schedulerhost"
)

// accLateRow is a ledger trial on etcd with a control store, the
// accounting on or off.
type accLateRow struct {
	on  bool
	row ledRow
}

// accLateJobs are the job counts of the lateness with and without the
// accounting.
var accLateJobs = []int{1000}

// accLateness runs, for each job count, the same ledger trial on etcd
// with the same window, the accounting off then on, and in the full run
// on then off again (so that a drift of the machine's load over the four
// weighs on both alike).
func accLateness(e *env, o options) []accLateRow {
	warm, window, order := 3*time.Second, 30*time.Second, []bool{false, true, true, false}
	if o.quick {
		window, order = 6*time.Second, order[:2]
	}
	var out []accLateRow
	for _, jobs := range accLateJobs {
		for _, on := range order {
			mode := accountingOff
			if on {
				mode = accountingOn
			}
			logf("accounting: lateness on etcd, %d jobs, accounting %s", jobs, onOff(on))
			row := ledgerTrial(e, "etcd", jobs, warm, window, mode)
			if row.err != nil {
				logf("accounting: lateness, %d jobs, accounting %s: %v", jobs, onOff(on), row.err)
			}
			out = append(out, accLateRow{on: on, row: row})
		}
	}
	return out
}

// accountingSwitch says how a baton instance switches the accounting off.
const accountingSwitch = "an instance built with `baton.New` sets it with `Config.Advanced.NoAccounting`"

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func (r *results) accLatenessMarkdown(w func(string, ...any)) {
	a := r.acc
	w("### Lateness with and without the accounting\n\n")
	w("Section 7's trial on etcd (a `schedulerhost.Host` leading with the backend's `Ledger()`, N jobs on `* * * * * *`, through a counting proxy, 3 s of warm-up), now with the backend's control store, run with the same N and window, in this order: with the accounting switched off (`schedulerhost.Config.NoAccounting: true`; %s), then on, as it runs by default, and in the full run on once more, then off; the rows are in that order. With it on, the leader reads every Account and each job's history at its term's start (in the warm-up), then writes each changed Account every %v (`schedulerhost.AccountWriteInterval`): one fenced write per job per interval while every job runs every second. Writes and requests are per instant (a second) at the proxy, over the window.\n\n", accountingSwitch, schedulerhost.AccountWriteInterval)
	w("| Accounting | Jobs | window | n | p50 / p99 / max | missing | extra | writes / instant | requests / instant | RSS MB |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, l := range a.lateness {
		x := l.row
		if x.err != nil {
			w("| %s | %d | %v | — | error: %v | | | | | |\n", onOff(l.on), x.jobs, x.window, x.err)
			continue
		}
		w("| %s | %d | %v | %d | %s | %d | %d | %.1f | %.1f | %.0f |\n", onOff(l.on), x.jobs, x.window, x.d.n(), x.d.triple(), x.missing, x.extra, x.writes, x.requests, x.rssMB)
	}
	w("\n")
}
