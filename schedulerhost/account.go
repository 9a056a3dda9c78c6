package schedulerhost

import (
	"errors"
	"sync"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// The accountant: a leader's writer of the tick accounting (package
// audit), one per term, with a Control store unless Config.NoAccounting.
//
// As they happen, the term records what became of each due tick into a
// per-job delta held in memory, under a mutex, with no I/O: every entry
// it finishes into the ledger (record, history.go), its refused claims
// (claim.go, refused.go), its overlap skips (admit.go), the ticks a
// reload retired before they fired and the schedule changes of SetJobs
// (loop.go, reload.go), and the ticks its start or a clock step let go
// by the misfire policy, or that a run-once catch-up covers (catchup.go).
//
// One goroutine of the term writes them (account_write.go). It first
// fences the control store (control.Store.Fence), reads every Account
// (one List), records each job's schedule as the term took it on, and
// merges each job's ledger history (one History read per job,
// catchUpWorkers at once): so the runs an earlier term finished but
// never wrote (its process died before its last write) are in the
// Account too. Then every AccountWriteInterval
// it writes each job whose Account the deltas changed, fenced by the
// term's token, conditioned on the version it read or wrote last: at most
// one write per changed job per interval, none for a job that did not
// change. A write that finds the Account changed reads it again, applies
// the delta again and asks once more; one that finds the term stale stops
// the writing (the next term merges the history). At the end of the term,
// after the drain, it writes once more on a fresh context bounded by
// ledgerTimeout, then returns: Lead waits for it.

// delta is what the term recorded of one job and has not written yet.
type delta struct {
	next  audit.Next // the job's ticks as recorded (its version then)
	specs []audit.Spec
	acct  audit.Account // the ranges, compacted as recorded (Add joins consecutive ticks)
	weak  []audit.Range // ticks refused as already claimed: dropped if an earlier term's history holds them
	late  []audit.Late  // earlier terms' late notes (audit/late.go), applied with AddLate, deleted once written
}

func (d *delta) empty() bool {
	return len(d.specs) == 0 && len(d.acct.Ranges) == 0 && len(d.weak) == 0 && len(d.late) == 0
}

// accountant holds a term's deltas and its writer's state.
type accountant struct {
	t *termRun

	mu      sync.Mutex
	pending map[string]*delta  // by job: recorded, not written
	stale   bool               // a write found the term stale: nothing more is written
	orphans map[string]*orphan // by job: recorded, not written: for a late note
	closed  bool               // the late notes are written: a record now is lost (lateRecord)

	soon chan struct{} // a record the ledger does not back: write it now, not at the next interval
	stop chan struct{} // closed by finish: write once more and return
	done chan struct{} // closed when the writer returned

	// The writer's, on its goroutine only.
	stored    map[string]audit.Stored   // as read or written last, by job
	others    map[string]map[int64]bool // by job, the ticks an earlier term's history holds
	unsettled map[string]*unsettled     // by job, those of them running at the merge
	nexts     map[audit.Spec]audit.Next // parsed specs
	sched     func(audit.Spec) (audit.Next, error)
}

// newAccountant returns t's accountant, or nil when the Host keeps no
// accounting (no Control store, or Config.NoAccounting). Every method of
// a nil accountant does nothing.
func newAccountant(t *termRun) *accountant {
	h := t.h
	if h.accountStore() == nil || h.cfg.NoAccounting {
		return nil
	}
	return &accountant{t: t, pending: map[string]*delta{}, soon: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		nexts: map[audit.Spec]audit.Next{}, sched: h.schedules()}
}

// deltaOf returns job's delta (a.mu held).
func (a *accountant) deltaOf(job string) *delta {
	d := a.pending[job]
	if d == nil {
		d = &delta{acct: audit.Account{Job: job}}
		a.pending[job] = d
	}
	return d
}

// nextOf returns the ticks of j's schedule as the loop reads them.
func (t *termRun) nextOf(j *jobState) audit.Next {
	loc := t.h.cfg.Location
	return func(tm time.Time) time.Time { return j.sched.Next(tm.In(loc)) }
}

// add records r, ticks of j.
func (a *accountant) add(j *jobState, r audit.Range) {
	if a == nil || r.Count <= 0 {
		return
	}
	if len(r.Error) > audit.MaxError {
		r.Error = r.Error[:audit.MaxError]
	}
	next := a.t.nextOf(j)
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		a.lateRecord(j.Name, r)
		return
	}
	if a.stale {
		a.orphan(j.Name, next, r)
		a.mu.Unlock()
		return
	}
	d := a.deltaOf(j.Name)
	d.next = next
	d.acct.Add(r, next)
	if unbacked(r) {
		// A skip, a refusal, a cover or a miss: only this term knows of
		// it (the ledger holds no entry a later term could merge), so it
		// is written at once rather than lost with a term that dies
		// before the next interval.
		select {
		case a.soon <- struct{}{}:
		default:
		}
	}
	a.mu.Unlock()
	a.trace(j, r, next)
}

// trace tells the Host's Tracer, if any, of r, ticks of j that did not
// run (any class but Ran), outside a.mu.
func (a *accountant) trace(j *jobState, r audit.Range, next audit.Next) {
	tr := a.t.h.cfg.Tracer
	if tr == nil || r.Class == audit.Ran {
		return
	}
	tr.TickNotRun(NotRun{Job: j.Name, Class: r.Class, Reason: r.Reason, Error: r.Error, First: r.First, Last: r.Last,
		Count: r.Count, Token: a.t.token, At: a.t.h.wallNow(), next: next})
}

// tick records tick of j as one tick of class c for reason why.
func (a *accountant) tick(j *jobState, tick time.Time, c audit.Class, why audit.Reason, err string) {
	if a == nil {
		return
	}
	a.add(j, audit.Range{Class: c, Reason: why, First: tick, Last: tick, Count: 1, Token: a.t.token,
		Instance: a.t.h.cfg.Instance, Error: err})
}

// run records r, an entry the term finishes into the ledger (or would,
// without a Ledger): its tick's class is what audit.Classify makes of it.
// A run-now run is no tick.
func (a *accountant) run(j *jobState, r ledger.Run) {
	if a == nil || r.RequestID != "" {
		return
	}
	a.add(j, rangeOf(r))
}

// rangeOf is the one-tick range of r, a settled ledger entry.
func rangeOf(r ledger.Run) audit.Range {
	c, why := audit.Classify(r)
	g := audit.Range{Class: c, Reason: why, First: r.Tick, Last: r.Tick, Count: 1, Token: r.Token,
		Instance: r.Instance, Attempts: r.Attempts, Error: r.Error}
	if !r.Started.IsZero() && r.Started.After(r.Tick) {
		g.Late = r.Started.Sub(r.Tick)
	}
	return g
}

// refused records a claim of tick of j that failed with err, not
// recorded in the ledger: refused as stale or denied, or already claimed
// (kept apart: an earlier term's entry of the tick wins over it).
func (a *accountant) refused(j *jobState, tick time.Time, err error) {
	if a == nil || err == nil {
		return
	}
	why := refusalReason(err)
	if why != audit.ReasonClaimed {
		a.tick(j, tick, audit.Refused, why, err.Error())
		return
	}
	r := audit.Range{Class: audit.Refused, Reason: why, First: tick, Last: tick, Count: 1, Token: a.t.token,
		Instance: a.t.h.cfg.Instance, Error: err.Error()}
	if len(r.Error) > audit.MaxError {
		r.Error = r.Error[:audit.MaxError]
	}
	next := a.t.nextOf(j)
	a.mu.Lock()
	stale := a.stale
	if !stale {
		d := a.deltaOf(j.Name)
		d.next = next
		d.weak = append(d.weak, r)
	}
	a.mu.Unlock()
	if !stale {
		a.trace(j, r, next)
	}
}

// refusalReason is the Refused reason of a claim's error.
func refusalReason(err error) audit.Reason {
	switch {
	case isRefused(err):
		return audit.ReasonDenied
	case errors.Is(err, election.ErrLeadershipLost):
		return audit.ReasonStaleTerm
	case errors.Is(err, ledger.ErrTickClaimed):
		return audit.ReasonClaimed
	}
	return audit.ReasonClaimFailed
}

// setSpec records that j's schedule is s from s.At on.
func (a *accountant) setSpec(job string, s audit.Spec) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.stale {
		d := a.deltaOf(job)
		d.specs = append(d.specs, s)
	}
}

// take returns the deltas recorded since the last take, by job.
func (a *accountant) take() map[string]*delta {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) == 0 {
		return nil
	}
	out := a.pending
	a.pending = map[string]*delta{}
	return out
}

// putBack returns d, not written, to job's pending delta, before what
// was recorded since it was taken.
func (a *accountant) putBack(job string, d *delta) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stale {
		a.orphanDelta(job, d)
		return
	}
	if later := a.pending[job]; later != nil {
		if later.next != nil {
			d.next = later.next
		}
		d.specs = append(d.specs, later.specs...)
		for _, r := range later.acct.Ranges {
			d.acct.Add(r, d.next)
		}
		d.weak = append(d.weak, later.weak...)
		d.late = append(d.late, later.late...)
	}
	a.pending[job] = d
}

// markStale stops the writing: the term is over. What it recorded that
// the ledger does not back goes to its late notes (account_late.go).
func (a *accountant) markStale() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stale = true
	for job, d := range a.pending {
		a.orphanDelta(job, d)
	}
	a.pending = map[string]*delta{}
}

// acctSpec records, if a term is leading (t not nil), that j's schedule
// is in force from at: SetJobs added the job or changed its schedule.
func (t *termRun) acctSpec(j *jobState, at time.Time) {
	if t == nil {
		return
	}
	t.acct.setSpec(j.Name, audit.Spec{At: at, Schedule: j.Schedule, Zone: t.h.cfg.Location.String()})
}

// retiredTick records d, a tick of a version SetJobs retired before it
// fired, as skipped for a reload, if it was due under the schedule in
// force at it: the job's new version has another schedule, from an
// instant after the tick (the loop woke late for it). A version with the
// same schedule took the tick over; a removed job is no longer
// accounted; a tick at the reload's very instant is not due (the new
// schedule is in force from then).
func (t *termRun) retiredTick(d dueTick) {
	if t.acct == nil {
		return
	}
	d.job.mu.Lock()
	cur := d.job.scheduled // the version the loop took in last
	d.job.mu.Unlock()
	if cur == nil || cur == d.job { // not taken in yet: look it up
		cur = nil
		for _, j := range t.h.jobSet() {
			if j.Name == d.job.Name {
				cur = j
			}
		}
	}
	if cur != nil && cur.Schedule != d.job.Schedule && d.tick.Before(cur.since) {
		t.acct.tick(d.job, d.tick, audit.Skipped, audit.ReasonReload, "")
	}
}

// settled records r, an entry of an earlier term that this term settled
// (settle.go).
func (a *accountant) settled(r ledger.Run) {
	if a == nil {
		return
	}
	for _, j := range a.t.h.jobSet() {
		if j.Name == r.Job {
			a.run(j, r)
			return
		}
	}
}
