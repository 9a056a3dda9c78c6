package schedulerhost

import (
	"context"
	"errors"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
)

// The record of terms (Config.Control): each leader writes its term, its
// token, instance and start, when it begins, and how it ended when Lead
// returns, so that every instance's /status can show who led, from when
// to when, and how each term ended (control.Jobs.Terms).

// keepTerms is how many term records the leader keeps: the newest.
const keepTerms = 20

// Bounds of the term records' writes: the start's, under the term, and
// the end's, on a fresh context since the term is over.
const (
	termStartTimeout = 5 * time.Second
	termEndTimeout   = 2 * time.Second
)

// termRecord is the record of one term on its way to the control store.
type termRecord struct {
	h       *Host
	jobs    *control.Jobs
	tm      control.Term
	started chan struct{} // closed once the start's write (and the tidy) returned
}

// recordStart writes term's start, then tidies the older records (the
// newest keepTerms kept, those left open by instances that died marked
// ended), on a goroutine of its own: the term's first ticks do not wait
// for the store. Lead calls it when a term begins; it returns nil without
// a Control store. end waits for the goroutine.
func (h *Host) recordStart(term election.Term) *termRecord {
	if h.cfg.Control == nil {
		return nil
	}
	r := &termRecord{h: h, jobs: control.NewJobs(h.cfg.Control), started: make(chan struct{}),
		tm: control.Term{Token: term.Token(), Instance: h.cfg.Instance, Started: time.Now().UTC()}}
	go func() {
		defer close(r.started)
		ctx, cancel := context.WithTimeout(term.Context(), termStartTimeout)
		defer cancel()
		if _, err := r.jobs.StartTerm(ctx, r.tm); err != nil {
			h.log.Debug("recording the term's start failed", "token", r.tm.Token, "err", err)
			return
		}
		if err := r.jobs.TidyTerms(ctx, r.tm.Token, keepTerms, time.Now().UTC()); err != nil {
			h.log.Debug("tidying the term records failed", "token", r.tm.Token, "err", err)
		}
	}()
	return r
}

// end waits for the start's record, then writes how the term ended
// (howEnded of Lead's error and of the cause of Lead's context), on a
// fresh context bounded by termEndTimeout. Lead calls it last, after the
// drain; a nil r (no Control store) does nothing.
func (r *termRecord) end(ctx context.Context, leadErr error) {
	if r == nil {
		return
	}
	<-r.started
	r.tm.Ended = time.Now().UTC()
	r.tm.How = howEnded(leadErr, context.Cause(ctx))
	ectx, cancel := context.WithTimeout(context.Background(), termEndTimeout)
	defer cancel()
	if err := r.jobs.EndTerm(ectx, r.tm); err != nil {
		r.h.log.Debug("recording the term's end failed", "token", r.tm.Token, "err", err)
	}
}

// howEnded says how a term ended, for its record, from Lead's error and
// the cause of the end of Lead's context: "lost: " and the reason, "shut
// down" (the Elector's Run context ended: SIGTERM), "stepped down" (an
// operator's or the application's step-down; with the hold's reason in
// parentheses when the Elector was held, election.HoldError), or
// "released".
func howEnded(leadErr, cause error) string {
	switch {
	case errors.Is(leadErr, election.ErrLeadershipLost):
		return "lost: " + leadErr.Error()
	case errors.Is(cause, election.ErrLeadershipLost):
		return "lost: " + cause.Error()
	case errors.Is(cause, election.ErrShuttingDown):
		return "shut down" // SIGTERM, not an operator's step-down
	case errors.Is(cause, election.ErrSteppingDown):
		if he, ok := errors.AsType[*election.HoldError](cause); ok {
			return "stepped down (" + he.Reason + ")"
		}
		return "stepped down"
	}
	return "released"
}
