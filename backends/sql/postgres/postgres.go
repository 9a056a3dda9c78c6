package postgres

import (
	"context"
	dbsql "database/sql"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/election"
)

// Config configures a PostgreSQL backend. Its fields are sql.Config's,
// documented there, and Listen. Zero values mean the defaults of
// sql.Config; New copies it and never mutates the caller's value.
type Config struct {
	// DB is the pool every statement goes through, normally opened with
	// pgx/v5/stdlib and a connect_timeout. Required.
	DB *dbsql.DB
	// Table is the lease table, [schema.]name in lowercase. Required.
	Table string
	// Election is the row's primary key in Table. Required.
	Election string
	// Timing is the lease timing (TTL sql.DefaultTTL when zero).
	Timing election.Timing
	// PollInterval is the pause between a waiting candidate's reads of the
	// row (sql.DefaultPollInterval when zero).
	PollInterval time.Duration
	// QueryTimeout bounds each statement but renewals (the TTL when zero).
	QueryTimeout time.Duration
	// Listen opens a dedicated connection (outside DB's pool) on which a
	// waiting candidate LISTENs for the holder's release, so that handover
	// takes milliseconds instead of up to a PollInterval. Nil means poll
	// only. ListenDSN builds one from a connection string. A broken or
	// stalled listen connection is reopened in the background; polling
	// goes on meanwhile.
	Listen func(ctx context.Context) (*pgx.Conn, error)
	// History is how many runs per job the Ledger keeps
	// (ledger.DefaultHistory when zero).
	History int
	// Logger receives transitions and retried errors (slog.Default() when
	// nil).
	Logger *slog.Logger
}

// core returns the settings the shared core takes.
func (c Config) core() sql.Config {
	return sql.Config{DB: c.DB, Table: c.Table, Election: c.Election, Timing: c.Timing,
		PollInterval: c.PollInterval, QueryTimeout: c.QueryTimeout, History: c.History, Logger: c.Logger}
}

// Validate reports every problem with c at once, as sql.Config.Validate
// does. It does no I/O.
func (c Config) Validate() error { return c.core().Validate() }

// New copies cfg, applies defaults, validates it and returns a Backend
// speaking PostgreSQL. It does not touch the database: call Check (or
// EnsureSchema) to fail fast on a missing schema.
func New(cfg Config) (*sql.Backend, error) {
	return sql.New(cfg.core(), Driver(cfg.Listen))
}

// Driver returns the sql.Driver of PostgreSQL, with listen (nil: poll
// only) as its LISTEN connection. New uses it; call it only to build a
// Backend from an sql.Config with sql.New.
func Driver(listen func(ctx context.Context) (*pgx.Conn, error)) sql.Driver {
	d := sql.Driver{
		Dialect:       sql.Postgres,
		SchemaMissing: schemaMissing,
		Permanent:     permanent,
		ClaimConflict: claimConflict,
	}
	if listen != nil {
		d.Listen = func(ctx context.Context, p sql.ListenParams) error { return listenOnce(ctx, listen, p) }
	}
	return d
}

// ListenDSN returns a Config.Listen function that connects with pgx to
// dsn, a PostgreSQL URL or key=value string (normally the one DB was
// opened with). Include connect_timeout in it.
func ListenDSN(dsn string) func(ctx context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) {
		return pgx.Connect(ctx, dsn)
	}
}

// SchemaSQL returns the statements creating the PostgreSQL schema of
// table: sql.SchemaSQL(sql.Postgres, table).
func SchemaSQL(table string) ([]string, error) { return sql.SchemaSQL(sql.Postgres, table) }
