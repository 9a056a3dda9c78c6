package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Claims.
//
// The claims of one job are made one at a time, in tick order, within a
// term: a tick's claim is not sent before the claim of the job's tick
// before it has been decided, so a later tick cannot overtake an earlier
// one whose claim is being asked again (the ledger refuses any tick not
// after the last claimed, so the earlier one would be lost). Under
// OverlapSkip and OverlapQueue one run of a job goes at a time, which
// orders its claims already; under OverlapAllow each admitted run takes a
// turn (below).
//
// A claim whose outcome stays unknown (an error that is neither a refusal
// of the tick or of the caller, nor a stale term) is asked again within
// ledgerTimeout; a claim the backend refused (ledger.ErrRefused) is not
// (refused.go). If the Host gives
// up on it (the time runs out, the term ends, or a retry finds the term
// stale), the tick may be recorded as claimed although its run never
// starts: the Host then finishes its history entry as ledger.ResultCancelled with
// an error starting "not started: claim outcome unknown", so the history
// does not say "running" for it (an attempt still in flight can land
// after it; a write that fails until the term ends is settled by the next
// term, settle.go). The tick stays
// claimed: no leader runs it
// later (re-opening it would need the ledger to tell, atomically with a
// new claim, that its run never started).

// ledgerTimeout bounds one ledger call, a claim with its retries
// included (the first attempt may wait up to maxLinger for its batch, and
// for a free slot when claimsInflight batches are on the wire).
const ledgerTimeout = 5 * time.Second

// turn orders the claims of an OverlapAllow job: a claim waits for prev,
// closed once the claim of the run admitted before it is decided, and
// closes mine once its own is.
type turn struct {
	prev <-chan struct{}
	mine chan struct{}
}

// takeTurn returns the next turn of j's claims (j.mu held), or no turn if
// j's claims are ordered otherwise.
func (t *termRun) takeTurn(j *jobState) turn {
	if j.Overlap != OverlapAllow || t.h.cfg.Ledger == nil {
		return turn{}
	}
	tn := turn{prev: j.lastTurn, mine: make(chan struct{})}
	if tn.prev != nil {
		select {
		case <-tn.prev:
			tn.prev = nil
		default:
		}
	}
	j.lastTurn = tn.mine
	return tn
}

// wait blocks until the previous claim is decided or the term is over.
func (tn turn) wait(t *termRun) {
	if tn.prev == nil {
		return
	}
	select {
	case <-tn.prev:
	case <-t.base.Done():
	}
}

// done lets the next claim go. Call it once, on every path, for a turn
// taken, after wait (a claim not made still passes the turn on in order).
func (tn turn) done() {
	if tn.mine != nil {
		close(tn.mine)
	}
}

// claimOutcome is what claim tells claimStep beside its error.
type claimOutcome struct {
	retried bool        // the claim was asked again
	unknown *ledger.Run // failed, outcome unknown: the entry to write
}

// claimStep claims the run's tick in the ledger (claim), unless it is
// claimed already, and passes the claim turn on. A tick not claimed is not
// started. The claim took I/O, so the term is checked again right before
// the start; if it is over, the tick is recorded as claimed but not
// started.
func claimStep(next runFunc) runFunc {
	return func(r *tickRun) {
		if !r.claimed {
			var out claimOutcome
			sent := time.Now()
			err := r.t.claim(r.job, r.tick.Time, r.tick.CatchUp, r.expected, &out)
			r.unknown = out.unknown
			r.expected = false
			r.passTurn()
			if err != nil {
				r.over = errors.Is(err, election.ErrLeadershipLost)
				return
			}
			r.claimed = true
			if out.retried || time.Since(sent) > slowClaim {
				// The claim was asked again, or slow to be answered:
				// pauseStep reads the pauses after it, not a read that
				// may predate a pause acknowledged meanwhile.
				r.pauseMark = r.t.markPauses()
			}
			if err := r.t.check(); err != nil {
				r.termOver(err)
				return
			}
		}
		next(r)
	}
}

// slowClaim is how long a claim may take to be answered and its run still
// use the pauses read as the instant's claims went out (or after its
// mark): a slower one reads them again, so that a pause acknowledged
// while it waited stops its run.
const slowClaim = 50 * time.Millisecond

// unknownOutcome reports whether a claim's error leaves it unknown
// whether the claim was recorded.
func unknownOutcome(err error) bool {
	return err != nil && !errors.Is(err, election.ErrLeadershipLost) && !errors.Is(err, ledger.ErrTickClaimed) && !isRefused(err)
}

// claim claims tick in the ledger, in a batch with the claims of other
// jobs (batch.go); on a stale term it ends the term. expected says the
// caller is a run counted by the claim queue's expectN: its first attempt
// counts as its arrival. With out, claim says whether it asked again, and
// if it failed with its outcome unknown, it leaves there the history entry
// saying the run did not start, for the caller to write once the run no
// longer counts as active (runTicks: a slow write must not hold the job's
// next ticks back); without out, it writes that entry itself.
func (t *termRun) claim(j *jobState, tick time.Time, catchUp, expected bool, out *claimOutcome) error {
	h := t.h
	ctx, cancel := context.WithTimeout(t.base, ledgerTimeout)
	defer cancel()
	c := ledger.Claim{Job: j.Name, Tick: tick, Token: t.token, Instance: h.cfg.Instance, CatchUp: catchUp, Started: h.wallNow()}
	err := t.claims.do(c, expected)
	// An error that is neither a refusal nor a stale term leaves the claim
	// unknown: it may have been recorded. Ask again while the term and the
	// claim's time allow; "already claimed" then means ours if the history
	// holds this tick with this term's token.
	ambiguous := unknownOutcome(err)
	for pause := 100 * time.Millisecond; unknownOutcome(err) && ctx.Err() == nil && t.live(); pause *= 2 {
		h.log.Warn("claim failed, asking again", "job", j.Name, "tick", tick, "token", t.token, "err", err)
		if out != nil {
			out.retried = true
		}
		timer := h.clock.newTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			continue
		case <-timer.C:
		}
		c.Started = h.wallNow()
		err = t.claimAgain(ctx, c)
		if errors.Is(err, ledger.ErrTickClaimed) {
			ours, other, herr := t.claimedByUs(ctx, j, tick)
			switch {
			case ours:
				h.log.Info("claim confirmed: the failed attempt had been recorded", "job", j.Name, "tick", tick, "token", t.token)
				err = nil
			case other:
				ambiguous = false // the tick is another term's: ours was never recorded
			case herr != nil:
				err = fmt.Errorf("tick already claimed, by this term or not: reading the history: %w", herr)
			}
		}
		ambiguous = ambiguous || unknownOutcome(err)
	}
	switch {
	case err == nil:
		t.recorded()
		return nil
	case isRefused(err): // not recorded, and asking again will not mend it (refused.go)
		t.refusedClaim(j, tick, catchUp, err)
	case errors.Is(err, election.ErrLeadershipLost):
		h.log.Error("claim refused: term is stale; stopping", "job", j.Name, "tick", tick, "token", t.token, "err", err)
		t.acct.refused(j, tick, err)
		t.lose(err)
	case errors.Is(err, ledger.ErrTickClaimed):
		h.log.Warn("run not started: tick already claimed", "job", j.Name, "tick", tick, "token", t.token)
		t.acct.refused(j, tick, err)
	default:
		h.log.Error("run not started: claim failed", "job", j.Name, "tick", tick, "token", t.token, "err", err)
	}
	if ambiguous || unknownOutcome(err) {
		if h.cfg.Observer != nil {
			h.cfg.Observer.Misfired(j.Name, 1)
		}
		// The claim may have been recorded: say in the history that this
		// run did not start (Finish touches only an entry with our token).
		now := h.wallNow()
		e := ledger.Run{Job: j.Name, Tick: tick, Instance: h.cfg.Instance, Token: t.token, CatchUp: catchUp,
			Started: now, Ended: now, Result: ledger.ResultCancelled, Error: "not started: claim outcome unknown: " + err.Error()}
		if out == nil {
			t.record(j, e)
		} else {
			out.unknown = &e
		}
	}
	return err
}

// claimAgain asks the ledger again for c alone, within what is left of
// the claim's time (ctx). A retry does not go through the claim queue: a
// batch would give it a fresh ledgerTimeout, and a retry made just before
// the claim's time ran out kept the job's next ticks waiting for almost
// two.
func (t *termRun) claimAgain(ctx context.Context, c ledger.Claim) error {
	errs := t.h.cfg.Ledger.Claim(ctx, []ledger.Claim{c})
	if len(errs) != 1 {
		return fmt.Errorf("ledger returned %d outcomes for 1 claim", len(errs))
	}
	return errs[0]
}

// claimedByUs reads the ledger's history for tick of j: ours says it is
// claimed with this term's token, other that it is claimed with another.
func (t *termRun) claimedByUs(ctx context.Context, j *jobState, tick time.Time) (ours, other bool, err error) {
	runs, err := t.h.cfg.Ledger.History(ctx, j.Name, ledger.DefaultHistory)
	if err != nil {
		return false, false, err
	}
	for _, r := range runs {
		if r.Tick.Equal(tick) {
			return r.Token == t.token, r.Token != t.token, nil
		}
	}
	return false, false, nil
}

// claimInOrder claims catch-up ticks of j oldest first, in turn tn, and
// returns those claimed; it stops at the first failure other than
// "already claimed", or when the term is over.
//
// expected says the caller is counted by the claim queue's expectN: its
// first claim is its arrival, and if it makes none it arrives anyway.
func (t *termRun) claimInOrder(j *jobState, ticks []time.Time, tn turn, expected bool) []time.Time {
	defer tn.done()
	defer func() {
		if expected {
			t.claims.arrive()
		}
	}()
	if expected && tn.prev != nil {
		t.claims.arrive() // not blocking the instant's batch while waiting
		expected = false
	}
	tn.wait(t)
	claimed := ticks[:0:0]
	for i, tick := range ticks {
		if err := t.check(); err != nil {
			for _, rest := range ticks[i:] {
				t.h.log.Warn("run not started: term over", "job", j.Name, "tick", rest, "token", t.token, "err", err)
			}
			break
		}
		err := t.claim(j, tick, true, expected, nil)
		expected = false
		if errors.Is(err, ledger.ErrTickClaimed) {
			continue
		}
		if err != nil {
			for _, rest := range ticks[i+1:] { // the first said why (claim)
				err := fmt.Errorf("an earlier catch-up tick's claim failed: %w", err)
				t.h.log.Warn("run not started: claim failed", "job", j.Name, "tick", rest, "token", t.token, "err", err)
				t.acct.refused(j, rest, err)
			}
			break
		}
		claimed = append(claimed, tick)
	}
	return claimed
}
