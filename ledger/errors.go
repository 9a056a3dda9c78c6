package ledger

import (
	"errors"
	"fmt"

	"github.com/batonhq/baton/election"
)

var (
	// ErrStaleTerm is returned by Ledger.Claim when the claiming term no
	// longer holds the election. It wraps election.ErrLeadershipLost.
	ErrStaleTerm = fmt.Errorf("ledger: stale term: %w", election.ErrLeadershipLost)
	// ErrTickClaimed is returned by Ledger.Claim when the tick is not newer
	// than the job's last claimed tick.
	ErrTickClaimed = errors.New("ledger: tick already claimed")
)
