package mysql

import (
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/batonhq/baton/backends/sql"
)

// Config configures a MySQL or MariaDB backend: sql.Config, whose fields
// and defaults are documented there. Zero values mean the defaults; New
// copies it and never mutates the caller's value.
type Config = sql.Config

// New copies cfg, applies defaults, validates it and returns a Backend
// speaking MySQL (MySQL 8, MariaDB 10.5 or later). It does not touch the
// database: call Check (or EnsureSchema) to fail fast on a missing schema.
func New(cfg Config) (*sql.Backend, error) { return sql.New(cfg, Driver()) }

// Driver returns the sql.Driver of MySQL. New uses it; call it only to
// build a Backend with sql.New.
func Driver() sql.Driver {
	return sql.Driver{
		Dialect:       sql.MySQL,
		SchemaMissing: schemaMissing,
		Permanent:     permanent,
		ClaimConflict: claimConflict,
	}
}

// SchemaSQL returns the statements creating the MySQL schema of table:
// sql.SchemaSQL(sql.MySQL, table).
func SchemaSQL(table string) ([]string, error) { return sql.SchemaSQL(sql.MySQL, table) }

// serverError returns the server's error number in err, and whether err
// holds one (false: the network or the driver failed).
func serverError(err error) (uint16, bool) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number, true
	}
	return 0, false
}

// schemaMissing reports whether err says a table or column does not
// exist.
func schemaMissing(err error) bool {
	n, _ := serverError(err)
	return n == 1146 || n == 1054 // ER_NO_SUCH_TABLE, ER_BAD_FIELD_ERROR
}

// permanent reports whether err is an answer of the server that retrying
// cannot change: any server error but those about connections, load,
// locks, shutdown and failover.
func permanent(err error) bool {
	n, ok := serverError(err)
	if !ok {
		return false // not a server answer: network, driver
	}
	switch n {
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

// claimConflict reports whether a claim transaction lost a race to a
// concurrent one: a duplicate first claim of a job, or a deadlock.
func claimConflict(err error) bool {
	n, _ := serverError(err)
	return n == 1062 || n == 1213 // ER_DUP_ENTRY, ER_LOCK_DEADLOCK
}
