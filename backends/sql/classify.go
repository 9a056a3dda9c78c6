package sql

import (
	"errors"
	"fmt"
	"strings"
)

// wrap turns a driver error of operation op into this package's error,
// recognising a missing or mismatched schema.
func (b *Backend) wrap(op string, err error) error {
	if b.drv.schemaMissing(err) {
		return fmt.Errorf("%w: %s: %w: create it with (*sql.Backend).EnsureSchema, or apply %s with %q replaced by %q",
			ErrSchemaMissing, op, err, schemaFile(b.drv.Dialect), placeholder, b.cfg.Table)
	}
	return fmt.Errorf("sql: %s: %w", op, err)
}

// permanent reports whether retrying the statement that failed with err
// cannot help: this package refused it, the pool is closed, or the server
// answered with an error that is not about load, locks, shutdown or
// connections (the Driver decides).
func (b *Backend) permanent(err error) bool {
	if errors.Is(err, ErrSchemaMissing) || errors.Is(err, ErrInvalidName) ||
		strings.Contains(err.Error(), "sql: database is closed") { // database/sql has no sentinel for it
		return true
	}
	return b.drv.permanent(err)
}
