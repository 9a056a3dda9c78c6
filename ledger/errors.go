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
	// ErrRefused is wrapped by the error of a ledger call that the backend
	// refused for a reason asking again will not mend: the caller is not
	// authorised (an HTTP 401 or 403, a permission or ACL denial). The
	// call changed nothing: a claim refused so was not recorded. Backends
	// mark such errors with Refused.
	ErrRefused = errors.New("ledger: refused by the backend")
)

// Refused returns err marked as refused (errors.Is(err, ErrRefused)),
// its text unchanged; nil stays nil. A backend calls it where it sees an
// authorisation failure.
func Refused(err error) error {
	if err == nil || errors.Is(err, ErrRefused) {
		return err
	}
	return refusedError{err}
}

type refusedError struct{ err error }

func (e refusedError) Error() string        { return e.err.Error() }
func (e refusedError) Unwrap() error        { return e.err }
func (e refusedError) Is(target error) bool { return target == ErrRefused }

// MarkRefused marks with Refused each error of errs that denied says is a
// refusal of the caller, leaving nil, ErrStaleTerm and ErrTickClaimed
// alone, and returns errs: a backend's Claim and Finish call it on what
// they return.
func MarkRefused(errs []error, denied func(error) bool) []error {
	for i, err := range errs {
		if err != nil && !errors.Is(err, ErrStaleTerm) && !errors.Is(err, ErrTickClaimed) && denied(err) {
			errs[i] = Refused(err)
		}
	}
	return errs
}
