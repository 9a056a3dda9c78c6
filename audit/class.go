package audit

import (
	"strings"

	"github.com/batonhq/baton/ledger"
)

// Class is what became of a due tick.
type Class string

// The classes, in the order reports list them.
const (
	Ran     Class = "ran"     // claimed and run (ok, failed, timed out or cancelled)
	Skipped Class = "skipped" // claimed or due and not run on purpose (a pause, the overlap policy, a reload)
	Covered Class = "covered" // one of the ticks a catch-up run stood for (By is that run's tick)
	Missed  Class = "missed"  // not run and not caught up (nobody led, the misfire policy, or nothing says why)
	Refused Class = "refused" // its claim was refused, or failed, or its outcome stayed unknown
	Lost    Class = "lost"    // started and never finished: its instance died, or its retries were cut short
	Pending Class = "pending" // due and not settled yet: running, or not yet written by the leader
)

// Classes lists every class, in report order.
var Classes = []Class{Ran, Skipped, Covered, Missed, Refused, Lost, Pending}

// Reason says why a tick is in its class: a closed set of codes, fit
// for a metric label.
type Reason string

// The reasons, by class.
const (
	// Ran.
	ReasonOK        Reason = "ok"
	ReasonFailed    Reason = "failed"
	ReasonTimeout   Reason = "timeout"
	ReasonCancelled Reason = "cancelled" // by leadership loss or shutdown (Error says which)
	// Skipped.
	ReasonPaused  Reason = "paused"  // the job was paused (Error says by whom)
	ReasonOverlap Reason = "overlap" // the overlap policy: the job's previous run was still going
	ReasonReload  Reason = "reload"  // a reload removed or replaced the job as the tick came
	// Covered.
	ReasonCatchUp Reason = "catch-up"
	// Missed.
	ReasonNoLeader    Reason = "no-leader"   // nobody led, and the misfire policy let it go (skip, beyond the grace, past the catch-up cap)
	ReasonClockStep   Reason = "clock-step"  // a forward step of the wall clock skipped over it, and the policy let it go
	ReasonUnaccounted Reason = "unaccounted" // due long enough ago, and nothing records it: the silent miss this package exists to show
	// Refused.
	ReasonStaleTerm   Reason = "stale-term"      // refused: the claiming term no longer held
	ReasonDenied      Reason = "denied"          // refused: the backend did not authorise the write
	ReasonClaimed     Reason = "already-claimed" // refused: the tick was not newer than the last claimed one
	ReasonClaimFailed Reason = "claim-failed"    // the claim's outcome stayed unknown, or a read it needed failed
	// Lost.
	ReasonOutcomeUnknown Reason = "outcome-unknown" // its term ended before its outcome was recorded
	ReasonRetryCut       Reason = "retry-cut"       // an attempt failed with retries left and the term ended before the next
	ReasonNotDelivered   Reason = "not-delivered"   // as retry-cut, and the last attempt never reached the application
	ReasonTermEnded      Reason = "term-ended"      // claimed, and its term ended before it started
	// Pending.
	ReasonRunning    Reason = "running"     // claimed and still running
	ReasonNotWritten Reason = "not-written" // due within the write lag: the leader has not written it yet
)

// Error texts the Host writes in a run's ledger entry that Classify
// reads. They are part of the ledger's format: change them only with
// Classify.
const (
	// ErrTextNotStarted starts the Error of a claimed tick the Host did
	// not start for a reason it could not settle (a claim outcome
	// unknown, a pause state unknown).
	ErrTextNotStarted = "not started: "
	// ErrTextClaimRefused starts the Error of a tick whose claim the
	// backend refused (ledger.ErrRefused): the leader keeps such an entry
	// in its own recent runs, since the backend refuses its writes.
	ErrTextClaimRefused = "not started: claim refused: "
	// ErrTextClaimedNotStarted starts the Error of a claimed tick whose
	// term ended before it started.
	ErrTextClaimedNotStarted = "claimed but not started"
	// ErrTextRetryCut is in the Error of a failed run whose next attempt
	// was not started because its term ended.
	ErrTextRetryCut = "(not retried: term over"
	// ErrTextNotDelivered is in the Error of a failed attempt that never
	// reached its application (the connection was refused).
	ErrTextNotDelivered = "not delivered: "
)

// Classify says what a ledger entry of a due tick makes of the tick. A
// run-now entry (RequestID set) is no tick: callers list it apart.
func Classify(r ledger.Run) (Class, Reason) {
	switch r.Result {
	case ledger.ResultOK:
		return Ran, ReasonOK
	case ledger.ResultFailed:
		if strings.Contains(r.Error, ErrTextRetryCut) {
			if strings.Contains(r.Error, ErrTextNotDelivered) {
				return Lost, ReasonNotDelivered
			}
			return Lost, ReasonRetryCut
		}
		return Ran, ReasonFailed
	case ledger.ResultTimeout:
		return Ran, ReasonTimeout
	case ledger.ResultCancelled:
		switch {
		case strings.HasPrefix(r.Error, ErrTextClaimRefused):
			return Refused, ReasonDenied
		case strings.HasPrefix(r.Error, ErrTextNotStarted):
			return Refused, ReasonClaimFailed
		case strings.HasPrefix(r.Error, ErrTextClaimedNotStarted):
			return Lost, ReasonTermEnded
		}
		return Ran, ReasonCancelled
	case ledger.ResultSkipped:
		return Skipped, ReasonPaused
	case ledger.ResultUnknown:
		return Lost, ReasonOutcomeUnknown
	}
	return Pending, ReasonRunning // running, settling
}
