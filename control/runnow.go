package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/ledger"
)

// How a run-now request goes from leader to leader. Each step is one
// conditional write, over the version it was read at:
//
//	pending                     RequestRun
//	taken (token)               Take: a leader took it, under its token
//	taken (token, Started)      Start: its run starts now, under the token,
//	                            written before the job is called
//	done                        the run's outcome, or Settle
//
// A term that took a request and did not start it (its term ended first,
// or the start margin held it) puts it back to pending (PutBack). If its
// write is lost, the next leader does it: after its Fence, which makes
// sure no write of an earlier term lands unseen, it settles each request
// an earlier term left taken (Settle): one without a start goes back to
// pending and runs again, since no run of it began; a started one is
// closed as cancelled, never run again, since its run may have happened
// (at most once, as a tick left running).

// Began says whether the run of r, taken, was recorded as started.
func (r RunRequest) Began() bool { return r.State == StateTaken && !r.Started.IsZero() }

// Fence makes sure that no write of a term before the one with token
// lands from now on unseen (Store.Fence). The leader calls it before its
// first read of the requests.
func (j *Jobs) Fence(ctx context.Context, token uint64) error {
	if token == 0 {
		return errors.New("control: fence without a token")
	}
	return j.s.Fence(ctx, token)
}

// Take writes r, pending, as taken by the term with token on instance,
// not started. It fails with ErrVersionMismatch if r changed since it
// was read, with ledger.ErrStaleTerm if the term is over.
func (j *Jobs) Take(ctx context.Context, r RunRequest, token uint64, instance string) (RunRequest, error) {
	if r.State != StatePending {
		return RunRequest{}, fmt.Errorf("control: take of request %s: it is %s, not pending", r.ID, r.State)
	}
	if token == 0 {
		return RunRequest{}, fmt.Errorf("control: take of request %s without a token", r.ID)
	}
	r.State, r.Token, r.Instance, r.Started = StateTaken, token, instance, time.Time{}
	return j.Update(ctx, r, token)
}

// Start writes r, taken by the term with token and not started, as
// started at at. The job is called only once it returned nil.
func (j *Jobs) Start(ctx context.Context, r RunRequest, token uint64, at time.Time) (RunRequest, error) {
	if r.State != StateTaken || r.Token != token || token == 0 {
		return RunRequest{}, fmt.Errorf("control: start of request %s by token %d: it is %s by token %d", r.ID, token, r.State, r.Token)
	}
	if at.IsZero() {
		return RunRequest{}, fmt.Errorf("control: start of request %s: no start time", r.ID)
	}
	r.Started = at
	return j.Update(ctx, r, token)
}

// PutBack writes r, taken and whose run did not start, as pending
// again, over the version it was read at. token is the writer's term, or
// zero for a term that is over (the version condition is then what
// keeps a later leader's change).
func (j *Jobs) PutBack(ctx context.Context, r RunRequest, token uint64) (RunRequest, error) {
	if r.State != StateTaken {
		return RunRequest{}, fmt.Errorf("control: put back of request %s: it is %s, not taken", r.ID, r.State)
	}
	r.State, r.Token, r.Instance, r.Started = StatePending, 0, "", time.Time{}
	return j.Update(ctx, r, token)
}

// Settle, called by the leader of the term with token once it fenced the
// store, settles r, which an earlier term took: a take without a start
// is pending again; a started run is done, cancelled, at now, saying
// why. It returns r as written.
func (j *Jobs) Settle(ctx context.Context, r RunRequest, token uint64, now time.Time) (RunRequest, error) {
	if r.State != StateTaken || r.Token >= token {
		return RunRequest{}, fmt.Errorf("control: settle of request %s by token %d: it is %s by token %d", r.ID, token, r.State, r.Token)
	}
	if !r.Began() {
		return j.PutBack(ctx, r, token)
	}
	r.State, r.Result, r.Ended = StateDone, ledger.ResultCancelled, now
	r.Error = fmt.Sprintf("the term with token %d ended before the run finished", r.Token)
	return j.Update(ctx, r, token)
}
