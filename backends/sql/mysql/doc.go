// Package mysql is baton's election backend on MySQL 8 or MariaDB 10.5 or
// later: New returns the shared core's *sql.Backend (package
// github.com/batonhq/baton/backends/sql, which documents the row, the
// ledger, the schema and what happens when) speaking MySQL through a
// database/sql pool opened with go-sql-driver/mysql.
//
// This package holds what needs that driver: reading the server's error
// numbers (a missing table, an error retrying cannot fix, a claim that
// lost a race). Followers only poll; there is no LISTEN, so Config (the
// core's sql.Config) has no Listen field. Importing it does not link pgx.
//
// The schema is backends/sql/schema/mysql.sql; SchemaSQL returns it for a
// table name and (*sql.Backend).EnsureSchema applies it.
package mysql
