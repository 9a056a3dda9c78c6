package schedulerhost

import (
	"context"
	"sync"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/ledger"
)

// unsettled is what the merge found of a job still running under an
// earlier term: its ticks, recorded once their entries settle (the
// earlier term's run finishes, or this term settles it, settle.go).
type unsettled struct {
	j     *jobState
	ticks map[int64]bool // UnixNano
}

// open fences the control store, reads every Account and puts before the
// term's records each job's schedule and its ledger history (the entries
// an earlier term finished, maybe never written to its Account). It
// reports whether it could read the Accounts.
func (a *accountant) open(ctx context.Context) bool {
	t := a.t
	h := t.h
	h.writeKept(ctx)
	rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	if err := h.accountStore().Fence(rctx, t.token); err != nil {
		a.failed("fencing the control store failed: accounts not written yet", err)
		return false
	}
	stored, err := audit.LoadAll(rctx, h.accountStore())
	if stored == nil {
		a.failed("reading the accounts failed: not written yet", err)
		return false
	}
	if err != nil { // some entries do not decode: their writes will fail on their version
		h.log.Warn("reading the accounts: some are unreadable", "token", t.token, "err", err)
	}
	a.stored, a.others, a.unsettled = stored, map[string]map[int64]bool{}, map[string]*unsettled{}
	jobs := h.jobSet()
	ds := make([]*delta, len(jobs))
	seen := make([]map[int64]bool, len(jobs))
	running := make([]map[int64]bool, len(jobs))
	sem := make(chan struct{}, catchUpWorkers) // the history reads, as many at once as the catch-up's
	var wg sync.WaitGroup
	for i, j := range jobs {
		spec := h.specOf(j)
		ds[i] = &delta{next: t.nextOf(j), specs: []audit.Spec{spec}, acct: audit.Account{Job: j.Name}, late: stored[j.Name].Late}
		if h.cfg.Ledger == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var oldest time.Time
			seen[i], running[i], oldest = a.merge(ctx, j, ds[i])
			// An Account never written, of a job this Host did not add
			// nor change: its schedule was in force for the runs merged.
			if len(stored[j.Name].Specs) == 0 && j.since.IsZero() && !oldest.IsZero() && oldest.Before(spec.At) {
				ds[i].specs[0].At = oldest
			}
		})
	}
	wg.Wait()
	for i, j := range jobs {
		a.others[j.Name] = seen[i]
		if len(running[i]) > 0 {
			a.unsettled[j.Name] = &unsettled{j: j, ticks: running[i]}
		}
		a.putBack(j.Name, ds[i])
	}
	return true
}

// merge adds to d the settled entries of j's ledger history, and returns
// the ticks earlier terms claimed, those of them still running, and the
// oldest tick it added.
func (a *accountant) merge(ctx context.Context, j *jobState, d *delta) (seen, running map[int64]bool, oldest time.Time) {
	t := a.t
	rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	runs, err := t.h.cfg.Ledger.History(rctx, j.Name, AbsenceHistory)
	cancel()
	if err != nil {
		t.h.log.Warn("reading a job's history for its account failed", "job", j.Name, "token", t.token, "err", err)
		return nil, nil, time.Time{}
	}
	seen, running = map[int64]bool{}, map[int64]bool{}
	for _, r := range runs {
		if r.RequestID != "" {
			continue
		}
		if r.Token != t.token {
			seen[r.Tick.UnixNano()] = true
			if r.Result == ledger.ResultRunning {
				running[r.Tick.UnixNano()] = true
			}
		}
		if r.Result != ledger.ResultRunning && r.Result != "" {
			d.acct.Add(rangeOf(r), d.next)
			if oldest.IsZero() || r.Tick.Before(oldest) {
				oldest = r.Tick
			}
		}
	}
	return seen, running, oldest
}

// resettle reads again the history of each job that had entries of
// earlier terms running at the merge (one History read per such job,
// while any is left), and records those that have settled since.
func (a *accountant) resettle(ctx context.Context) {
	t := a.t
	for name, u := range a.unsettled {
		rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		runs, err := t.h.cfg.Ledger.History(rctx, name, AbsenceHistory)
		cancel()
		if err != nil {
			continue
		}
		still := false
		for _, r := range runs {
			k := r.Tick.UnixNano()
			if !u.ticks[k] || r.RequestID != "" {
				continue
			}
			if r.Result == ledger.ResultRunning {
				still = true
				continue
			}
			a.add(u.j, rangeOf(r))
			delete(u.ticks, k)
		}
		if !still { // settled, or gone from the history: nothing more to learn
			delete(a.unsettled, name)
		}
	}
}
