package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// schemaMissing reports whether err says a table, sequence or column does
// not exist.
func schemaMissing(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "42P01" || pe.Code == "42703" // undefined_table, undefined_column
	}
	return false
}

// permanent reports whether err is an answer of the server that retrying
// cannot change: any error but those about connections, serialization,
// resources, locks, shutdown and system errors.
func permanent(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code[:2] {
	case "08", // connection exception
		"40", // transaction rollback: serialization failure, deadlock
		"53", // insufficient resources
		"55", // object not in prerequisite state (lock not available)
		"57", // operator intervention: shutdown, cancelled
		"58": // system error
		return false
	}
	return true
}

// claimConflict reports whether a ledger statement was rolled back for a
// deadlock (or a serialization failure), so that running it again is
// safe and will see the other transaction's outcome.
func claimConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") // deadlock_detected, serialization_failure
}
