package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/control"
)

// ErrNoAccounting: the Host has no Control store, where the accounting
// lives.
var ErrNoAccounting = errors.New("schedulerhost: no tick accounting without a control store")

// AccountWriteInterval is how often a leader writes the Accounts its runs
// changed (one fenced write per changed job); it also writes them at the
// end of its term. A reader treats a tick nothing records as pending for
// AuditLag.
const (
	AccountWriteInterval = 5 * time.Second
	AuditLag             = 3*AccountWriteInterval + ledgerTimeout
)

// Audit reports the due ticks of each job of the set (or of job alone,
// if not empty) after from through to: one read of the Accounts and
// their late notes, applied to them, one of
// the terms, one of who leads (Config.Leader, for the leader's note of
// refused claims), and one of each job's ledger history (AbsenceHistory
// entries). It works on every instance, leading or not. A job whose
// Account holds no schedule yet is read with its schedule now, due from
// when this Host took it on.
func (h *Host) Audit(ctx context.Context, job string, from, to time.Time) ([]audit.Report, error) {
	store := h.accountStore()
	if store == nil {
		return nil, ErrNoAccounting
	}
	var jobs []*jobState
	for _, j := range h.jobSet() {
		if job == "" || j.Name == job {
			jobs = append(jobs, j)
		}
	}
	if job != "" && len(jobs) == 0 {
		return nil, fmt.Errorf("schedulerhost: audit: no job %q", job)
	}
	var accts map[string]audit.Stored
	var err error
	if job != "" {
		var st audit.Stored
		st, err = audit.Load(ctx, store, job)
		accts = map[string]audit.Stored{job: st}
	} else {
		accts, err = audit.LoadAll(ctx, store)
	}
	// An account that does not decode spoils its own job's report only.
	unreadable := err
	if accts == nil || (job != "" && err != nil) {
		return nil, err
	}
	terms, err := control.NewJobs(h.cfg.Control).Terms(ctx)
	if err != nil {
		return nil, fmt.Errorf("schedulerhost: audit: read the terms: %w", err)
	}
	refusals := h.refusals(ctx)
	out := make([]audit.Report, 0, len(jobs))
	for _, j := range jobs {
		a := accts[j.Name].Account
		a.Job = j.Name
		if len(a.Specs) == 0 {
			a.Specs = []audit.Spec{h.specOf(j)}
		}
		a = h.withLate(a, accts[j.Name].Late, func(tm time.Time) time.Time { return j.sched.Next(tm.In(h.cfg.Location)) })
		var notes []string
		if _, ok := accts[j.Name]; !ok && unreadable != nil && strings.Contains(unreadable.Error(), audit.Key(j.Name)+":") {
			notes = append(notes, "its account does not decode, read as empty: "+unreadable.Error())
		}
		runs, err := h.recentRuns(ctx, j)
		if err != nil {
			notes = append(notes, "its ledger history is unreadable: "+err.Error())
		}
		rep, err := audit.Compute(audit.Input{Account: a, History: runs, Terms: terms, Refusals: refusals, From: from, To: to, Now: h.wallNow(),
			Lag: AuditLag, Schedules: h.schedules()})
		if err != nil {
			rep = audit.Report{Job: j.Name, From: from, To: to}
			notes = append(notes, err.Error())
		}
		rep.Error = strings.Join(notes, "; ")
		out = append(out, rep)
	}
	return out, nil
}

// accountStore is where the accounts live: Accounts, or Control.
func (h *Host) accountStore() control.Store {
	if h.cfg.Accounts != nil {
		return h.cfg.Accounts
	}
	return h.cfg.Control
}

// refusals reads the leader's report of refused claims from its lease's
// note; none if there is no leader, no note, or the read fails (those
// ticks then show as unaccounted).
func (h *Host) refusals(ctx context.Context) []audit.Refusal {
	if h.cfg.Leader == nil {
		return nil
	}
	info, err := h.cfg.Leader(ctx)
	if err != nil {
		return nil
	}
	if r, ok := audit.ParseNote(info.Note); ok {
		return []audit.Refusal{r}
	}
	return nil
}

// specOf is j's schedule as an Account records it, in force from when
// this Host took it on.
func (h *Host) specOf(j *jobState) audit.Spec {
	return audit.Spec{At: laterOf(h.started, j.since), Schedule: j.Schedule, Zone: h.cfg.Location.String()}
}

// schedules parses an Account's specs as the loop does: ParseSchedule,
// read in the zone recorded with it.
func (h *Host) schedules() audit.Schedules {
	var mu sync.Mutex
	zones := map[string]*time.Location{}
	return func(s audit.Spec) (audit.Next, error) {
		sched, err := ParseSchedule(s.Schedule)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		loc, ok := zones[s.Zone]
		mu.Unlock()
		if !ok {
			if loc, err = time.LoadLocation(s.Zone); err != nil {
				return nil, fmt.Errorf("zone %q: %w", s.Zone, err)
			}
			mu.Lock()
			zones[s.Zone] = loc
			mu.Unlock()
		}
		return func(t time.Time) time.Time { return sched.Next(t.In(loc)) }, nil
	}
}
