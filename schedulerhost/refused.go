package schedulerhost

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Refused claims.
//
// A claim the backend refused (ledger.ErrRefused: not authorised) was not
// recorded, and asking again will not mend it: the Host does not ask
// again. The tick does not run; the log says "run not started: claim
// refused" with the backend's error, the job's recent runs (Status) keep
// an entry saying the same (the ledger cannot: the backend refuses its
// writes), and a ClaimObserver counts it.
//
// The term's lease carries the streak (election.SetNote, an
// audit.Refusal), since the backend refuses the ledger's writes: every
// instance's Audit shows the ticks from its first as refused.
//
// A leader whose claims are all refused keeps its lease (it may still
// renew it) while no job runs anywhere. An instance elsewhere, with other
// credentials, may be able to claim: so once a term's claims have been
// refused, with none recorded in between, at least minRefusals times and
// over more than the lease's TTL (refusalSpan), the Host tells the
// function given to OnClaimsRefused, which may step the term down (the
// node does so when an eligible follower is known; see
// docs/operations.md). Errors that may be transient (a timeout, a reset
// connection, a server error) never count: they are asked again
// (claim.go), and a recorded claim ends the streak.

// minRefusals is how many refused claims in a row a streak needs, beside
// its span, before OnClaimsRefused hears of it.
const minRefusals = 3

// defaultRefusalSpan is the span of a term whose lease cannot tell its
// deadline (NewTerm).
const defaultRefusalSpan = 15 * time.Second

// RefusedStreak describes the claims of a term refused in a row
// (ledger.ErrRefused), with no claim recorded in between.
type RefusedStreak struct {
	Token uint64        // the term's token
	Count int           // claims refused in the streak
	Since time.Time     // when the first of them was refused
	Span  time.Duration // how long the streak had to last to be reported: the lease's TTL, as the term tells it
	Err   error         // the last refusal
}

// ClaimObserver is what an Observer may also implement to learn of
// claims the backend refused (metrics).
type ClaimObserver interface {
	// ClaimRefused: a claim of a tick of job was refused by the backend
	// (ledger.ErrRefused); the tick does not run.
	ClaimRefused(job string)
}

// OnClaimsRefused sets f, called when a term's claims have been refused
// in a row at least minRefusals times over more than the lease's TTL, and
// again at each later refusal of the streak while the call before has
// returned. f runs on a goroutine of the term, which ends with the term
// (Lead waits for it); ctx ends with the term. Nil removes it. Call it
// before Lead.
func (h *Host) OnClaimsRefused(f func(ctx context.Context, s RefusedStreak)) {
	if f == nil {
		h.onRefused.Store(nil)
		return
	}
	h.onRefused.Store(&f)
}

// refusals is the streak of a term's refused claims.
type refusals struct {
	mu      sync.Mutex
	count   int
	since   time.Time
	first   time.Time // the streak's first refused tick
	calling bool      // OnClaimsRefused's function is running
	closed  bool      // Lead waits for the term's background work: start no more
	span    time.Duration
}

// waitBackground waits for the term's background work (the function of
// OnClaimsRefused, the settlement) once no more can start. Lead calls it
// last.
func (t *termRun) waitBackground() {
	t.refused.mu.Lock()
	t.refused.closed = true
	t.refused.mu.Unlock()
	t.bg.Wait()
}

// refusalSpan is how long a streak must last: the lease's TTL as the term
// can tell it from its lead at its open (TTL - SafetyMargin, whose default
// is max(TTL/5, 500ms)), or defaultRefusalSpan without a deadline.
func refusalSpan(base context.Context) time.Duration {
	d, ok := election.LocalDeadline(base)
	if !ok {
		return defaultRefusalSpan
	}
	lead := max(time.Until(d), 0)
	return max(lead*5/4, lead+500*time.Millisecond)
}

// recorded ends the streak: a claim of the term was recorded.
func (t *termRun) recorded() {
	t.refused.mu.Lock()
	defer t.refused.mu.Unlock()
	if t.refused.count > 0 {
		election.SetNote(t.base, "")
	}
	t.refused.count = 0
}

// refusedClaim accounts for a claim of tick of j that the backend refused
// with err: it logs it, counts it, keeps a history entry saying so in
// j's recent runs, and reports the streak once it is long enough.
func (t *termRun) refusedClaim(j *jobState, tick time.Time, catchUp bool, err error) {
	h := t.h
	h.log.Error("run not started: claim refused", "job", j.Name, "tick", tick, "token", t.token, "err", err)
	if o, ok := h.cfg.Observer.(ClaimObserver); ok {
		o.ClaimRefused(j.Name)
	}
	t.acct.refused(j, tick, err)
	now := h.wallNow()
	e := ledger.Run{Job: j.Name, Tick: tick, Instance: h.cfg.Instance, Token: t.token, CatchUp: catchUp,
		Started: now, Ended: now, Result: ledger.ResultCancelled, Error: refusedPrefix + err.Error()}
	j.mu.Lock()
	j.keep(e) // not Finish: the claim was not recorded, and the backend refuses this caller
	j.mu.Unlock()

	r := &t.refused
	r.mu.Lock()
	if r.count == 0 {
		r.since, r.first = time.Now(), tick
	}
	r.count++
	s := RefusedStreak{Token: t.token, Count: r.count, Since: r.since, Span: r.span, Err: err}
	// The ledger and the control store refuse this term's writes: its
	// lease, which it still renews, tells every instance (Audit).
	election.SetNote(t.base, audit.Refusal{Token: t.token, Instance: h.cfg.Instance, Since: r.since, First: r.first,
		Count: r.count, Error: err.Error()}.Note())
	f := h.onRefused.Load()
	call := f != nil && !r.calling && !r.closed && r.count >= minRefusals && time.Since(r.since) > r.span && t.live()
	if call {
		r.calling = true
		t.bg.Add(1)
	}
	r.mu.Unlock()
	if !call {
		return
	}
	h.log.Warn("claims refused for longer than the lease's TTL", "token", t.token, "refused", s.Count,
		"since", s.Since, "span", s.Span, "err", err)
	go func() {
		defer t.bg.Done()
		(*f)(t.base, s)
		r.mu.Lock()
		r.calling = false
		r.mu.Unlock()
	}()
}

// refusedPrefix begins the Error of a tick whose claim was refused.
const refusedPrefix = audit.ErrTextClaimRefused

// isRefused reports whether err says the backend refused the caller.
func isRefused(err error) bool { return errors.Is(err, ledger.ErrRefused) }
