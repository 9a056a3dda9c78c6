package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// Absence: a dead man's switch that every instance can read.
//
// A job with a Deadline is overdue when the latest of its due ticks that
// is at least Deadline old (T) has no run that ended ok standing for it:
// no entry of the ledger with Result ok and a tick at or after T. A
// catch-up run stands for the missed ticks from its first one through its
// own tick (Tick.CatchUpFrom), so an ok catch-up run whose tick is at or
// after T counts. The ticks are the loop's: the job's schedule in the
// Host's Location (DST policy, @every anchored on the epoch), through the
// same Next. Only the ticks after the Host was built count (after the
// reload that added the job or changed its schedule, for such a job): a
// job has no T, and is not overdue, until its first tick after that is
// Deadline old. A job paused in the control store is not overdue. A
// run-now run is no tick: it does not count.
//
// The runs that ended ok are read from two places: the job's newest
// AbsenceHistory ledger entries, and, with a Control store, the job's
// tick Account (package audit), whose newest tick in a range of class ran
// and reason ok counts as well. So a job whose ok run is older than the
// ledger entries read (more than AbsenceHistory ticks failed since, or a
// Deadline longer than that many ticks) still finds it.
//
// Reading the ledger and the Accounts needs no term: a follower, even one
// that never led, reads what the leader recorded.

// AbsenceHistory is how many of a job's newest ledger entries Absence
// reads, in one ledger call per job (ledger.DefaultHistory, what a
// backend keeps unless told otherwise). An ok run older than those counts
// only if the job's Account holds it.
const AbsenceHistory = ledger.DefaultHistory

// JobAbsence is what Absence reports of one job with a Deadline.
type JobAbsence struct {
	Job      string
	Deadline time.Duration
	// Due is T, the latest due tick at least Deadline old that counts
	// (see above); zero if there is none yet.
	Due time.Time
	// LastOKTick is the newest tick of a run that ended ok, among the
	// ledger entries read and the job's Account; zero if none did.
	// LastOKEnded is the end of that run, if a ledger entry read holds
	// it (an Account records no end); else zero.
	LastOKTick, LastOKEnded time.Time
	// Paused: the job is paused in the control store (never overdue).
	Paused bool
	// Overdue: Due is set, the job is not paused, and no run that ended
	// ok has a tick at or after Due.
	Overdue bool
	// Err is the failed read of the job's history; the other fields but
	// Job, Deadline and Due are then unknown (zero).
	Err error
}

// Absence reports, at now, each job of the set that has a Deadline, in
// the set's order: a read of the pauses and one of the Accounts (with a
// Control store: one List of each prefix), then one read of
// AbsenceHistory entries per job from the Ledger (without one, this
// instance's own recent runs). It works on every instance, leading or
// not. It blocks on those reads, each bounded by ctx. The error joins the
// jobs' read errors (each also in its JobAbsence.Err); if the pauses or
// the Accounts cannot be read it returns nil and that error, having read
// nothing more. An Account that does not decode is the read error of its
// job (with the Accounts' error, of each job whose Account is not among
// those decoded). It is called by baton's runner, every
// Advanced.AbsencePollInterval.
func (h *Host) Absence(ctx context.Context, now time.Time) ([]JobAbsence, error) {
	var jobs []*jobState
	for _, j := range h.jobSet() {
		if j.Deadline > 0 {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	var paused map[string]control.Pause
	var accts map[string]audit.Stored
	var acctErr error
	if h.cfg.Control != nil {
		ps, err := control.NewJobs(h.cfg.Control).Pauses(ctx)
		if err != nil {
			return nil, fmt.Errorf("schedulerhost: absence: read the pauses: %w", err)
		}
		paused = ps
		if accts, acctErr = audit.LoadAll(ctx, h.accountStore()); accts == nil && acctErr != nil {
			return nil, fmt.Errorf("schedulerhost: absence: %w", acctErr)
		}
	}
	out := make([]JobAbsence, 0, len(jobs))
	var errs []error
	for _, j := range jobs {
		a := JobAbsence{Job: j.Name, Deadline: j.Deadline}
		a.Due = latestTick(j.sched, h.cfg.Location, laterOf(h.started, j.since), now.Add(-j.Deadline))
		st, ok := accts[j.Name]
		if !ok && acctErr != nil {
			a.Err = fmt.Errorf("schedulerhost: absence: account of %s: %w", j.Name, acctErr)
			errs = append(errs, a.Err)
			out = append(out, a)
			continue
		}
		runs, err := h.recentRuns(ctx, j)
		if err != nil {
			a.Err = fmt.Errorf("schedulerhost: absence: history of %s: %w", j.Name, err)
			errs = append(errs, a.Err)
			out = append(out, a)
			continue
		}
		for _, r := range runs {
			if r.Result == ledger.ResultOK && r.RequestID == "" {
				a.LastOKTick, a.LastOKEnded = r.Tick, r.Ended
				break
			}
		}
		if t := lastOKRange(st.Account, now); t.After(a.LastOKTick) {
			a.LastOKTick, a.LastOKEnded = t, time.Time{}
		}
		_, a.Paused = paused[j.Name]
		a.Overdue = !a.Due.IsZero() && !a.Paused && (a.LastOKTick.IsZero() || a.LastOKTick.Before(a.Due))
		out = append(out, a)
	}
	return out, errors.Join(errs...)
}

// lastOKRange returns the newest tick of a's ranges of class ran and
// reason ok that is not after now (as audit.Report's LastOK), zero if
// none.
func lastOKRange(a audit.Account, now time.Time) time.Time {
	var last time.Time
	for _, r := range a.Ranges {
		if r.Class == audit.Ran && r.Reason == audit.ReasonOK && r.Last.After(last) && !r.Last.After(now) {
			last = r.Last
		}
	}
	return last
}

// recentRuns returns j's AbsenceHistory newest entries, newest tick
// first: from the Ledger, or without one from this instance's memory.
func (h *Host) recentRuns(ctx context.Context, j *jobState) ([]ledger.Run, error) {
	if h.cfg.Ledger != nil {
		return h.cfg.Ledger.History(ctx, j.Name, AbsenceHistory)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.recentNewestFirst(AbsenceHistory, h.cfg.Instance), nil
}

// latestTick returns the latest tick of s in loc after after and at or
// before until, zero if none. It looks back from until through windows
// that double from a second, with s.Next, which is a function of the
// instant alone (tz.go, every.go): the ticks it finds are the loop's.
func latestTick(s cron.Schedule, loc *time.Location, after, until time.Time) time.Time {
	if !until.After(after) {
		return time.Time{}
	}
	for w := time.Second; ; w *= 2 {
		from := until.Add(-w)
		if !from.After(after) {
			from = after
		}
		t := s.Next(from.In(loc))
		if !t.IsZero() && !t.After(until) {
			for n := s.Next(t); !n.IsZero() && !n.After(until); n = s.Next(n) {
				t = n
			}
			return t
		}
		if from.Equal(after) {
			return time.Time{}
		}
	}
}
