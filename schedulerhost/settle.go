package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/ledger"
)

// Settling: a term writes each run's end (Ledger.Finish), asking again
// with backoff while the term lasts (record, history.go). A term that ends
// first (its token expired, the backend unreachable until its deadline,
// its process killed) leaves its entries "running" for good. So each new
// term, once its catch-up is done, reads the recent history of every job
// and settles the entries an earlier term left running as
// ledger.ResultUnknown, with an error naming both terms and no end time.
// No run of an earlier term can still be going by then under the lease's
// rules (a term's runs are stopped before its lease can pass on); a run
// that ignored its cancellation may still write its own end later, and
// Finish, not conditioned, then replaces the settlement with it.

// Settle finds, among the newest ledger.DefaultHistory runs of each of
// jobs in l, the entries of terms with tokens below token that are still
// "running", and stores each as ledger.ResultUnknown with an error naming
// its term and this one. It returns the runs it settled and the errors of
// the reads and writes that failed, joined. A term calls it as it begins;
// the conformance suite calls it to check a backend's ledger.
func Settle(ctx context.Context, l ledger.Ledger, jobs []string, token uint64) ([]ledger.Run, error) {
	var errs []error
	var found []ledger.Run
	for _, job := range jobs {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		runs, err := l.History(ctx, job, ledger.DefaultHistory)
		if err != nil {
			errs = append(errs, fmt.Errorf("job %q: reading the history: %w", job, err))
			continue
		}
		for _, r := range runs {
			if r.Result == ledger.ResultRunning && r.Token < token && r.RequestID == "" {
				r.Result, r.Ended = ledger.ResultUnknown, time.Time{}
				r.Error = fmt.Sprintf("outcome not recorded: the term with token %d ended before the run's end was written; settled by the term with token %d", r.Token, token)
				found = append(found, r)
			}
		}
	}
	var settled []ledger.Run
	for len(found) > 0 {
		batch := found[:min(len(found), max(l.MaxBatch(), 1))]
		found = found[len(batch):]
		for i, err := range l.Finish(ctx, batch) {
			if err != nil {
				errs = append(errs, fmt.Errorf("job %q, tick %v: writing the settlement: %w", batch[i].Job, batch[i].Tick, err))
				continue
			}
			settled = append(settled, batch[i])
		}
	}
	return settled, errors.Join(errs...)
}

// settle settles, in the background of the term, what earlier terms left
// running (Settle), and logs each entry it settled.
func (t *termRun) settle(ctx context.Context) {
	h := t.h
	jobs := h.jobSet()
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
	}
	t.bg.Go(func() {
		settled, err := Settle(ctx, h.cfg.Ledger, names, t.token)
		for _, r := range settled {
			t.acct.settled(r)
			h.log.Warn("settled a run an earlier term left running: outcome unknown", "job", r.Job, "tick", r.Tick,
				"run_token", r.Token, "instance", r.Instance, "token", t.token)
		}
		if err != nil && ctx.Err() == nil {
			h.log.Warn("settling runs earlier terms left running failed", "token", t.token, "err", err)
		}
	})
}
