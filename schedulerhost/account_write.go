package schedulerhost

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// start starts the accountant's writer, a goroutine of the term; finish
// ends it.
func (a *accountant) start() {
	if a == nil {
		return
	}
	go a.writer()
}

// finish makes the writer write once more, on a fresh context, and
// waits for it to return. Lead calls it after the drain.
func (a *accountant) finish() {
	if a == nil {
		return
	}
	close(a.stop)
	<-a.done
}

// writer opens the Accounts (fence, read, merge), then writes what
// changed every AccountWriteInterval, at once after a record the ledger
// does not back (add), and once more when finish asks.
func (a *accountant) writer() {
	defer close(a.done)
	tk := time.NewTicker(AccountWriteInterval)
	defer tk.Stop()
	base := a.t.base
	open := a.open(base)
	for {
		select {
		case <-a.stop:
			// The term's last finishes are known: write them on a fresh
			// context, the term's being over or about to be.
			ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
			defer cancel()
			if open || a.open(ctx) {
				a.flush(ctx)
			}
			lctx, lcancel := context.WithTimeout(context.Background(), ledgerTimeout)
			defer lcancel()
			a.leaveLate(lctx)
			return
		case <-tk.C:
		case <-a.soon:
		}
		if a.isStale() {
			continue
		}
		if !open {
			open = a.open(base)
			continue
		}
		a.flush(base)
	}
}

func (a *accountant) isStale() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stale
}

// failed logs a failed read or write of the accounts, and stops the
// writing if it says the term is stale.
func (a *accountant) failed(msg string, err error) {
	t := a.t
	if errors.Is(err, ledger.ErrStaleTerm) || errors.Is(err, election.ErrLeadershipLost) {
		a.markStale() // what it could not write goes to late notes (leaveLate), loudly
		t.h.log.Debug("accounts not written: the term is over", "token", t.token, "err", err)
		return
	}
	if t.base.Err() != nil && errors.Is(err, context.Canceled) {
		return // the term's end cut the write short: its last write asks again
	}
	t.h.accountWriteFailed("account")
	t.h.log.Warn(msg, "token", t.token, "err", err)
}

// flush writes each job whose Account the deltas taken change: one
// write per such job (two when the Account changed since it was read),
// after the reads of resettle, if any.
func (a *accountant) flush(ctx context.Context) {
	a.resettle(ctx)
	for job, d := range a.take() {
		if a.isStale() { // a write found the term over: the rest go to late notes
			a.putBack(job, d)
			continue
		}
		a.write(ctx, job, d)
	}
}

// write writes job's Account with d applied, if that changes it; on a
// version mismatch it reads the Account again and asks once more. What
// it could not write goes back to the pending deltas.
func (a *accountant) write(ctx context.Context, job string, d *delta) {
	st, ok := a.stored[job]
	if !ok {
		st = audit.Stored{Account: audit.Account{Job: job}}
	}
	st = cloneStored(st)
	if !a.apply(&st, d) {
		return
	}
	err := a.save(ctx, &st)
	if errors.Is(err, control.ErrVersionMismatch) {
		rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		fresh, lerr := audit.Load(rctx, a.t.h.accountStore(), job)
		cancel()
		if lerr != nil {
			err = lerr
		} else {
			a.stored[job] = fresh
			st = cloneStored(fresh)
			if !a.apply(&st, d) {
				return
			}
			err = a.save(ctx, &st)
		}
	}
	if err == nil {
		a.stored[job] = st
		a.dropLate(ctx, d.late)
		return
	}
	a.failed("writing an account failed: asked again at the next write", err)
	a.putBack(job, d)
}

// save writes st, fitted within audit.MaxBytes, and keeps its new
// version in it.
func (a *accountant) save(ctx context.Context, st *audit.Stored) error {
	if _, err := st.Fit(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	v, err := audit.Save(wctx, a.t.h.accountStore(), *st, a.t.token)
	if err == nil {
		st.Version = v
	}
	return err
}

// apply applies d to st and reports whether st changed.
func (a *accountant) apply(st *audit.Stored, d *delta) bool {
	changed := false
	for _, s := range d.specs {
		changed = st.SetSpec(s) || changed
	}
	for _, r := range d.acct.Ranges {
		changed = st.Add(r, a.nextAt(&st.Account, r.First, d.next)) || changed
	}
	for _, l := range d.late {
		for _, r := range l.Ranges {
			st.AddLate(r, a.nextAt(&st.Account, r.First, d.next))
		}
		changed = true // written, so that the note can go
	}
	seen := a.others[st.Job]
	for _, r := range d.weak {
		if !seen[r.First.UnixNano()] {
			changed = st.Add(r, a.nextAt(&st.Account, r.First, d.next)) || changed
		}
	}
	return changed
}

// dropLate deletes the late notes an Account write merged; a note that
// stays is merged again by a later term (AddLate records a tick once).
func (a *accountant) dropLate(ctx context.Context, lates []audit.Late) {
	for _, l := range lates {
		dctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		err := audit.DeleteLate(dctx, a.t.h.accountStore(), l)
		cancel()
		if err != nil {
			a.t.h.log.Info("accounting: a merged late note is left for a later term", "key", l.Key, "err", err)
		}
	}
}

// nextAt returns the ticks of the spec of acct in force at tick, or
// fallback if none is, or it does not parse.
func (a *accountant) nextAt(acct *audit.Account, tick time.Time, fallback audit.Next) audit.Next {
	var in *audit.Spec
	for i := range acct.Specs {
		if !acct.Specs[i].At.After(tick) {
			in = &acct.Specs[i]
		}
	}
	if in == nil {
		return fallback
	}
	if n, ok := a.nexts[*in]; ok {
		return n
	}
	n, err := a.sched(*in)
	if err != nil {
		return fallback
	}
	a.nexts[*in] = n
	return n
}

// cloneStored returns a copy of st that shares nothing with it.
func cloneStored(st audit.Stored) audit.Stored {
	st.Specs = slices.Clone(st.Specs)
	st.Ranges = slices.Clone(st.Ranges)
	st.Folded = maps.Clone(st.Folded)
	return st
}
