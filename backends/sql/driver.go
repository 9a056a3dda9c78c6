package sql

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Dialect selects the SQL the core sends: the statements and the schema
// file. The zero value is not a dialect.
type Dialect int

// Dialects.
const (
	// Postgres is PostgreSQL 12 or later (the database clock is
	// clock_timestamp(); LISTEN/NOTIFY speeds up handover).
	Postgres Dialect = iota + 1
	// MySQL is MySQL 8 or MariaDB 10.5 or later (the database clock is
	// UTC_TIMESTAMP(6); followers only poll).
	MySQL
)

// String returns "postgres", "mysql" or "Dialect(n)".
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// Driver is what a dialect package hands the core: which SQL to send, and
// the parts that need the database driver's own types (its errors, and
// PostgreSQL's LISTEN connection). postgres.Driver and mysql.Driver return
// one, and postgres.New and mysql.New use them; a program that builds
// either dialect from one Config (as the node package does) passes theirs
// to New. Nobody else fills one in.
//
// Every function is called by the Backend, possibly from several
// goroutines at once. A nil function means "no" (never missing, never
// permanent, never retried) or, for Listen, "poll only".
type Driver struct {
	// Dialect selects the statements and the schema file. Required.
	Dialect Dialect
	// SchemaMissing reports whether err, from a statement, says that a
	// table, sequence or column does not exist.
	SchemaMissing func(err error) bool
	// Permanent reports whether err is an answer of the server that
	// retrying the statement cannot change (not about load, locks,
	// shutdown or connections). Network errors are not permanent.
	Permanent func(err error) bool
	// ClaimConflict reports whether a ledger statement or transaction
	// failed because a concurrent one won a race (a duplicate key or a
	// deadlock) and was rolled back, so that running it again will see
	// the other's outcome.
	ClaimConflict func(err error) bool
	// Listen, if not nil, opens a connection of its own, subscribes to
	// p.Channel, calls p.Wake once subscribed and on every notification on
	// the channel, and returns when the connection fails or ctx is done.
	// A waiting Acquire runs it on a goroutine it owns and restarts it
	// after a failure; polling goes on meanwhile.
	Listen func(ctx context.Context, p ListenParams) error
}

// ListenParams are the arguments of Driver.Listen.
type ListenParams struct {
	// Channel is the notification channel of the election; the holder's
	// release notifies it.
	Channel string
	// Wake tells the waiting candidate to read the row now. It never
	// blocks.
	Wake func()
	// QueryTimeout bounds the connect and each statement (Config's,
	// defaults applied).
	QueryTimeout time.Duration
	// HealthInterval is how long the connection may stay quiet before
	// Listen checks it with a ping.
	HealthInterval time.Duration
}

func (d Driver) validate() error {
	switch d.Dialect {
	case Postgres, MySQL:
	case 0:
		return errors.New("Driver.Dialect: required (sql.Postgres or sql.MySQL)")
	default:
		return fmt.Errorf("Driver.Dialect %v: unknown (want sql.Postgres or sql.MySQL)", d.Dialect)
	}
	if d.Listen != nil && d.Dialect != Postgres {
		return fmt.Errorf("Driver.Listen: set, but LISTEN/NOTIFY is PostgreSQL only (Dialect %v)", d.Dialect)
	}
	return nil
}

func (d Driver) schemaMissing(err error) bool { return d.SchemaMissing != nil && d.SchemaMissing(err) }

func (d Driver) permanent(err error) bool { return d.Permanent != nil && d.Permanent(err) }

func (d Driver) claimConflict(err error) bool { return d.ClaimConflict != nil && d.ClaimConflict(err) }
