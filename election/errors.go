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

var errDeadlinePassed = errors.New("local deadline passed")
