package sql

import "errors"

var (
	// ErrSchemaMissing is wrapped by the errors of Acquire, Leader, Check
	// and the Ledger when a table or sequence of the schema does not
	// exist. The error names the missing relation and the schema file to
	// apply; EnsureSchema creates it all.
	ErrSchemaMissing = errors.New("sql: schema missing")
	// ErrInvalidName is wrapped by the errors of Acquire and the Ledger
	// when an identity or job name cannot be stored.
	ErrInvalidName = errors.New("sql: invalid name")
)
