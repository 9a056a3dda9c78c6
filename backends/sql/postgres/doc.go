// Package postgres is baton's election backend on PostgreSQL 12 or later:
// New returns the shared core's *sql.Backend (package
// github.com/batonhq/baton/backends/sql, which documents the row, the
// ledger, the schema and what happens when) speaking PostgreSQL through a
// database/sql pool opened with pgx/v5/stdlib.
//
// This package holds what needs pgx: reading PostgreSQL's error codes (a
// missing relation, an error retrying cannot fix) and the optional LISTEN
// connection (Config.Listen), on which a waiting candidate hears the
// holder's release at once instead of at its next poll. Importing it does
// not link the MySQL driver.
//
// The schema is backends/sql/schema/postgres.sql; SchemaSQL returns it for
// a table name and (*sql.Backend).EnsureSchema applies it.
package postgres
