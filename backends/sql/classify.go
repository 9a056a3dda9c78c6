package sqlrow

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// wrap turns a driver error of operation op into this package's error,
// recognising a missing or mismatched schema.
func (b *Backend) wrap(op string, err error) error {
	if schemaMissing(err) {
		return fmt.Errorf("%w: %s: %w: create it with (*sqlrow.Backend).EnsureSchema, or apply %s with %q replaced by %q",
			ErrSchemaMissing, op, err, schemaFile(b.cfg.Dialect), placeholder, b.cfg.Table)
	}
	return fmt.Errorf("sqlrow: %s: %w", op, err)
}

// schemaMissing reports whether err says a table, sequence or column does
// not exist.
func schemaMissing(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "42P01" || pe.Code == "42703" // undefined_table, undefined_column
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1146 || me.Number == 1054 // ER_NO_SUCH_TABLE, ER_BAD_FIELD_ERROR
	}
	return false
}

// permanent reports whether retrying the statement that failed with err
// cannot help: the server answered with an error that is not about load,
// locks, shutdown or connections.
func permanent(err error) bool {
	if errors.Is(err, ErrSchemaMissing) || errors.Is(err, ErrInvalidName) ||
		strings.Contains(err.Error(), "sql: database is closed") { // database/sql has no sentinel for it
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
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
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1040, // too many connections
			1053, // server shutdown in progress
			1205, // lock wait timeout
			1213, // deadlock
			1927, // connection killed (MariaDB)
			1290, // read-only (failover in progress)
			3024, // query execution interrupted, max_execution_time
			1317: // query execution interrupted
			return false
		}
		return true
	}
	return false
}
