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
// twice, the accounting off then on, with the same window.
func accLateness(e *env, o options) []accLateRow {
	warm, window := 3*time.Second, 30*time.Second
	if o.quick {
		window = 6 * time.Second
	}
	var out []accLateRow
	for _, jobs := range accLateJobs {
		for _, on := range []bool{false, true} {
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
const accountingSwitch = "an instance built with `baton.New` has no such setting: its leader always writes the Accounts where it has a control store"

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func (r *results) accLatenessMarkdown(w func(string, ...any)) {
	a := r.acc
	w("### Lateness with and without the accounting\n\n")
	w("Section 7's trial on etcd (a `schedulerhost.Host` leading with the backend's `Ledger()`, N jobs on `* * * * * *`, through a counting proxy, 3 s of warm-up), now with the backend's control store, run twice in a row with the same N and window: once with the accounting switched off (`schedulerhost.Config.NoAccounting: true`; %s), once on, as it runs by default. With it on, the leader reads every Account and each job's history at its term's start (in the warm-up), then writes each changed Account every %v (`schedulerhost.AccountWriteInterval`): one fenced write per job per interval while every job runs every second. Writes and requests are per instant (a second) at the proxy, over the window.\n\n", accountingSwitch, schedulerhost.AccountWriteInterval)
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
