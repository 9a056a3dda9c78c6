package schedulerhost

import (
	"fmt"
	"slices"

	"github.com/batonhq/baton/ledger"
)

// What History shows beside the ledger's entries.
//
// An entry still "running" whose term has ended (this Host leads with a
// later token, or a later entry of the job has a later token) is shown as
// ledger.ResultSettling: its term could not write its end, and the next
// leader settles it (settle.go). A tick whose claim the backend refused
// is in no ledger (the backend refused to record it): this Host's own
// record of it is shown among the ledger's entries, by tick.

// SettlingError is the Error History gives an entry it shows as
// ledger.ResultSettling, with the token of its term.
func SettlingError(token uint64) string {
	return fmt.Sprintf("outcome being settled: the term with token %d ended before the run's end was written; the leader settles it", token)
}

// MarkSettling shows as ledger.ResultSettling, with SettlingError, each of
// runs (one job's, newest first) still "running" whose term has ended: a
// later entry has a later token, or leader, the token of the term leading
// now (0: unknown), is later.
func MarkSettling(runs []ledger.Run, leader uint64) {
	var later uint64 // the highest token of the entries newer than the one looked at
	for i := range runs {
		r := &runs[i]
		if r.Result == ledger.ResultRunning && (r.Token < leader || r.Token < later) {
			r.Result, r.Error = ledger.ResultSettling, SettlingError(r.Token)
		}
		later = max(later, r.Token)
	}
}

// present returns runs, newest first, of job, as History shows them (see
// above), at most n.
func (h *Host) present(job string, runs []ledger.Run, n int) []ledger.Run {
	var leading uint64
	h.mu.Lock()
	if h.term != nil {
		leading = h.term.token
	}
	jobs := h.jobs
	h.mu.Unlock()
	MarkSettling(runs, leading)
	for _, j := range jobs {
		if j.Name != job {
			continue
		}
		j.mu.Lock()
		local := j.unrecorded(h.cfg.Instance)
		j.mu.Unlock()
		if len(local) == 0 {
			break
		}
		runs = append(runs, local...)
		slices.SortStableFunc(runs, func(a, b ledger.Run) int { return b.Tick.Compare(a.Tick) })
	}
	if len(runs) > n {
		runs = runs[:n]
	}
	return runs
}
