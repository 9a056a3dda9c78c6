// Package fence checks a term's fencing token where the write happens: at
// the resource, so that a write sent by a term that has since ended (its
// process paused past the lease, its request slow on the network) is
// refused rather than applied over a newer term's write.
//
// A fence is kept per election and resource: the highest token (with its
// epoch) a write has carried. A write whose token is older is refused with
// an error wrapping ErrStale; a write of another election is refused with
// ErrOtherElection and never compared. The guards:
//
//   - SQL (PostgreSQL, MySQL and MariaDB): SQL.Check, inside the caller's
//     own *sql.Tx, so that the check and the write commit or fail together.
//   - Redis: package fence/redisfence, one script that checks the fence
//     and performs the write.
//   - HTTP: Middleware checks Baton-Token and Baton-Election against a
//     Store before the handler runs.
//
// Epochs: a token counter can start over below a fence (a move to another
// backend, a recreated terms object or table, a flushed Redis). A token
// carries an epoch, a number that grows when the counter starts over; a
// write with a greater epoch than its fence starts a new fence at its
// token, and one with a smaller epoch is refused. A restart that keeps the
// epoch cannot be told from a stale write: an operator's Reset clears the
// fence. See docs/fencing.md.
package fence

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/batonhq/baton/election"
)

// Token is what a write carries: the election that issued it, the epoch
// of its token counter and the term's token. Tokens are ordered by
// (Epoch, N).
type Token struct {
	Election string
	Epoch    uint64
	N        uint64
}

func (t Token) String() string {
	return fmt.Sprintf("election %q epoch %d token %d", t.Election, t.Epoch, t.N)
}

// Less reports whether t is older than u: a smaller epoch, or the same
// epoch and a smaller token. It does not look at the elections.
func (t Token) Less(u Token) bool {
	if t.Epoch != u.Epoch {
		return t.Epoch < u.Epoch
	}
	return t.N < u.N
}

// FromContext returns the token of the term a job's ctx derives from:
// election.ElectionFromContext and election.TokenFromContext, with epoch
// 0 (set Epoch when the counter has started over). ok is false when ctx
// lacks either.
func FromContext(ctx context.Context) (t Token, ok bool) {
	name, ok1 := election.ElectionFromContext(ctx)
	n, ok2 := election.TokenFromContext(ctx)
	return Token{Election: name, N: n}, ok1 && ok2
}

// Errors, matched with errors.Is.
var (
	// ErrStale: the fence holds a newer token; the write must not happen.
	// It is final: a retry with the same token is refused again.
	ErrStale = errors.New("fence: stale token")
	// ErrOtherElection: the token was issued by another election than the
	// guard's. Tokens of two elections are never compared.
	ErrOtherElection = errors.New("fence: token of another election")
	// ErrRetry: the database aborted the transaction to keep it
	// serializable (PostgreSQL 40001 at REPEATABLE READ or SERIALIZABLE,
	// InnoDB deadlock 1213 or lock wait timeout 1205). Roll back and run
	// the transaction again; a stale token is then refused.
	ErrRetry = errors.New("fence: transaction must be retried")
	// ErrInvalid: a token or name the guard cannot use.
	ErrInvalid = errors.New("fence: invalid")
)

// StaleError tells which fence refused which token. It wraps ErrStale.
type StaleError struct {
	Resource string
	Token    Token // the refused token
	Fence    Token // the fence's: the newest token written
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: stale token for resource %q: %s is older than the fence's epoch %d token %d",
		e.Resource, e.Token, e.Fence.Epoch, e.Fence.N)
}

func (e *StaleError) Unwrap() error { return ErrStale }

// check validates a token for a guard of election and resource.
func check(election, resource string, t Token) error {
	switch {
	case election == "":
		return fmt.Errorf("%w: guard's election is empty", ErrInvalid)
	case resource == "":
		return fmt.Errorf("%w: resource is empty", ErrInvalid)
	case t.Election != election:
		return fmt.Errorf("%w: token's election %q, guard's %q (resource %q)", ErrOtherElection, t.Election, election, resource)
	case t.N == 0:
		return fmt.Errorf("%w: token 0 (resource %q): terms' tokens start at 1", ErrInvalid, resource)
	case t.N > math.MaxInt64 || t.Epoch > math.MaxInt64:
		return fmt.Errorf("%w: %s above 2^63-1 (resource %q)", ErrInvalid, t, resource)
	}
	return nil
}

// Check validates t for a fence of election and resource: ErrOtherElection
// when t is another election's, ErrInvalid for an empty name or token 0.
// The guards call it first; a Store of one's own may too.
func Check(election, resource string, t Token) error { return check(election, resource, t) }
