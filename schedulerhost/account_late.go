package schedulerhost

import (
	"context"
	"time"

	"github.com/batonhq/baton/audit"
)

// A term's records that never reached its Accounts (audit/late.go): once
// a write finds the term over, or its last writes fail, what it recorded
// and did not write becomes an orphan, and the writer leaves
// the orphans in a late note per job, unfenced, after its last write. A
// note it cannot write either (the store unreachable) stays with the
// Host, which writes it at its next term's start; it is lost only with
// the process. Every such failure is logged at Warn and counted
// (AccountObserver).

// orphan is what a term recorded of one job and could not write.
type orphan struct {
	next audit.Next
	acct audit.Account
}

// unbacked says whether r is a record no ledger entry backs: a skip, a
// refusal, a cover or a miss. Runs (ran, lost) are in the ledger, which
// the next term merges.
func unbacked(r audit.Range) bool { return r.Class != audit.Ran && r.Class != audit.Lost }

// orphan keeps r, a record of job, for the term's late note (a.mu
// held). Runs and lost ticks too: the ledger holds their entries only if
// their claims landed (a claim whose outcome is unknown may not have),
// and the next term merges only the newest entries of each job.
func (a *accountant) orphan(job string, next audit.Next, r audit.Range) {
	if a.orphans == nil {
		a.orphans = map[string]*orphan{}
	}
	o := a.orphans[job]
	if o == nil {
		o = &orphan{next: next, acct: audit.Account{Job: job}}
		a.orphans[job] = o
	}
	o.acct.Add(r, o.next)
}

// orphanDelta keeps d's records (a.mu held).
func (a *accountant) orphanDelta(job string, d *delta) {
	for _, r := range d.acct.Ranges {
		a.orphan(job, d.next, r)
	}
}

// leaveLate writes, after the term's last write, the records it could not
// write as late notes; what it cannot write either goes to the Host.
func (a *accountant) leaveLate(ctx context.Context) {
	a.mu.Lock()
	for job, d := range a.pending { // left by writes that failed to the end
		a.orphanDelta(job, d)
	}
	a.pending = map[string]*delta{}
	orphans := a.orphans
	a.orphans, a.closed = nil, true
	a.mu.Unlock()
	t := a.t
	for job, o := range orphans {
		n := ticksOf(o.acct)
		if err := audit.SaveLate(ctx, t.h.accountStore(), o.acct, t.token); err != nil {
			t.h.accountWriteFailed("late-note")
			t.h.log.Warn("accounting: a late note could not be written either: kept for this instance's next term", "job", job, "token", t.token, "ticks", n, "err", err)
			t.h.keepLate(t.token, o)
			continue
		}
		t.h.log.Warn("accounting: the term's records could not be written to its account: left in a late note", "job", job, "token", t.token, "ticks", n)
	}
}

// lateRecord says that r, a record of job made after the term's late
// notes were written (a run abandoned by the drain that returned since),
// is lost: logged at Warn and counted as a late note not written.
func (a *accountant) lateRecord(job string, r audit.Range) {
	t := a.t
	t.h.accountWriteFailed("late-note")
	t.h.log.Warn("accounting: a record after the term's last write is not kept", "job", job, "token", t.token,
		"class", r.Class, "reason", r.Reason, "first", r.First, "ticks", r.Count)
}

// ticksOf counts the ticks of a's ranges.
func ticksOf(a audit.Account) int64 {
	var n int64
	for _, r := range a.Ranges {
		n += r.Count
	}
	return n
}

// keptLate is an orphan whose late note could not be written, kept by
// the Host with its term's token.
type keptLate struct {
	token uint64
	o     *orphan
}

// keepLate keeps o, a late note of the term with token that could not be
// written, until the Host's next term writes it (writeKept).
func (h *Host) keepLate(token uint64, o *orphan) {
	h.lateMu.Lock()
	defer h.lateMu.Unlock()
	h.kept = append(h.kept, keptLate{token, o})
}

// writeKept writes the late notes the Host kept, before its term reads
// the accounts; those it cannot write it keeps.
func (h *Host) writeKept(ctx context.Context) {
	h.lateMu.Lock()
	kept := h.kept
	h.kept = nil
	h.lateMu.Unlock()
	var left []keptLate
	for _, k := range kept {
		wctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		err := audit.SaveLate(wctx, h.accountStore(), k.o.acct, k.token)
		cancel()
		if err != nil {
			h.accountWriteFailed("late-note")
			left = append(left, k)
		}
	}
	if len(left) > 0 {
		h.log.Warn("accounting: late notes of earlier terms still not written: kept", "notes", len(left))
		h.lateMu.Lock()
		h.kept = append(left, h.kept...)
		h.lateMu.Unlock()
	}
}

// accountWriteFailed tells the Observer, if it counts them, that a write
// of the accounting (what: "account" or "late-note") failed.
func (h *Host) accountWriteFailed(what string) {
	if o, ok := h.cfg.Observer.(AccountObserver); ok {
		o.AccountWriteFailed(what)
	}
}

// withLate returns acct with the late notes applied (audit.AddLate),
// each range read with the schedule in force at its first tick (fallback
// if none is, or it does not parse).
func (h *Host) withLate(acct audit.Account, lates []audit.Late, fallback audit.Next) audit.Account {
	if len(lates) == 0 {
		return acct
	}
	acct.Ranges = append([]audit.Range(nil), acct.Ranges...)
	sched := h.schedules()
	for _, l := range lates {
		for _, r := range l.Ranges {
			acct.AddLate(r, nextIn(acct.Specs, r.First, sched, fallback))
		}
	}
	return acct
}

// nextIn returns the ticks of the spec of specs in force at tick, or
// fallback.
func nextIn(specs []audit.Spec, tick time.Time, sched func(audit.Spec) (audit.Next, error), fallback audit.Next) audit.Next {
	var in *audit.Spec
	for i := range specs {
		if !specs[i].At.After(tick) {
			in = &specs[i]
		}
	}
	if in == nil {
		return fallback
	}
	n, err := sched(*in)
	if err != nil {
		return fallback
	}
	return n
}
