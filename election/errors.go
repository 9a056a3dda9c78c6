package election

import (
	"errors"
	"fmt"
)

var (
	// ErrLeadershipLost is the cause of a term's end when the lease was lost:
	// it expired, was deleted, was taken over, or could not be renewed before
	// the local safe deadline. Another candidate may already lead.
	ErrLeadershipLost = errors.New("election: leadership lost")
	// ErrReleased is a lease's Err after Release.
	ErrReleased = errors.New("election: lease released")
	// ErrSteppingDown is the cause of a term context's end when the elector
	// was asked to stop (its Run context ended, or StepDown was called) while
	// the lease is still held and renewed. Work may drain before the release.
	ErrSteppingDown = errors.New("election: stepping down")
	// ErrShuttingDown is the cause when the elector's Run context ended
	// (the process shuts down): an ErrSteppingDown that no operator asked
	// for.
	ErrShuttingDown = fmt.Errorf("%w: shutdown", ErrSteppingDown)
	// ErrNoLeader is returned by LeaderReader.Leader when nobody leads.
	ErrNoLeader = errors.New("election: no leader")
)

// LostError wraps ErrLeadershipLost with the backend's reason.
func LostError(reason error) error {
	if reason == nil {
		return ErrLeadershipLost
	}
	return &lostError{reason: reason}
}

type lostError struct{ reason error }

func (e *lostError) Error() string   { return ErrLeadershipLost.Error() + ": " + e.reason.Error() }
func (e *lostError) Unwrap() []error { return []error{ErrLeadershipLost, e.reason} }

// HoldError is the cause of a term context's end when the Elector stepped
// down while a Hold was in effect: StepDown was called while held (the
// application gate steps a leader down when its application stops
// answering), or the term was won while held (Config.HoldCooldown). It
// wraps ErrSteppingDown, so errors.Is(err, ErrSteppingDown) holds; Reason
// is the hold's, as Hold was given it. Read it with errors.As on
// context.Cause of the lead function's context.
type HoldError struct{ Reason string }

func (e *HoldError) Error() string { return ErrSteppingDown.Error() + " (held: " + e.Reason + ")" }
func (e *HoldError) Unwrap() error { return ErrSteppingDown }

var errDeadlinePassed = errors.New("local deadline passed")
