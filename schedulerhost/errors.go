package schedulerhost

import (
	"errors"
	"fmt"

	"github.com/batonhq/baton/election"
)

var (
	// ErrStaleTerm is returned by Ledger.Claim when the claiming term no
	// longer holds the election. It wraps election.ErrLeadershipLost.
	ErrStaleTerm = fmt.Errorf("schedulerhost: stale term: %w", election.ErrLeadershipLost)
	// ErrTickClaimed is returned by Ledger.Claim when the tick is not newer
	// than the job's last claimed tick.
	ErrTickClaimed = errors.New("schedulerhost: tick already claimed")
	// ErrShutdownTimeout is the cause given to a run's context when a
	// graceful stop waited ShutdownTimeout and the run was still going.
	ErrShutdownTimeout = errors.New("schedulerhost: shutdown timeout")
	// ErrJobTimeout is the cause given to a run's context when the job's
	// Timeout elapsed.
	ErrJobTimeout = errors.New("schedulerhost: job timeout")
)
