package sql

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Schema holds the schema files, one per dialect: schema/postgres.sql and
// schema/mysql.sql. In them the table name is the placeholder
// "baton_lease"; SchemaSQL substitutes it.
//
//go:embed schema/*.sql
var Schema embed.FS

// placeholder is the table name used in the schema files.
const placeholder = "baton_lease"

func schemaFile(d Dialect) string {
	if d == MySQL {
		return "schema/mysql.sql"
	}
	return "schema/postgres.sql"
}

// SchemaSQL returns the statements creating the schema of table for d (the
// lease table, its token sequence or counter, and the ledger tables), the
// placeholder replaced by table. Each statement is idempotent (IF NOT
// EXISTS). Use it to feed a migration tool; EnsureSchema runs it. On
// MySQL, EnsureSchema also adds the columns that tables created by an
// earlier version lack (the attempts column of the runs table), which no
// idempotent MySQL statement can do: see schema/README.md.
func SchemaSQL(d Dialect, table string) ([]string, error) {
	if d != Postgres && d != MySQL {
		return nil, fmt.Errorf("sql: schema: Dialect %v: unknown", d)
	}
	if !validTable(table) {
		return nil, fmt.Errorf("sql: schema: Table %q: not a safe SQL identifier", table)
	}
	raw, err := Schema.ReadFile(schemaFile(d))
	if err != nil {
		return nil, err
	}
	var stmts []string
	var cur strings.Builder
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			s := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			stmts = append(stmts, strings.ReplaceAll(s, placeholder, table))
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		return nil, fmt.Errorf("sql: schema: %s: trailing statement without ';'", schemaFile(d))
	}
	return stmts, nil
}

// EnsureSchema creates whatever is missing of the schema (see SchemaSQL)
// and then runs Check. It is opt-in: call it at start-up if the service
// may create tables; otherwise apply the schema file with your migrations.
// It blocks on the database, bounded by ctx. Several instances may call it
// at once: on PostgreSQL the statements run in one transaction under an
// advisory lock; on MySQL each CREATE ... IF NOT EXISTS is atomic.
func (b *Backend) EnsureSchema(ctx context.Context) error {
	stmts, err := SchemaSQL(b.drv.Dialect, b.cfg.Table)
	if err != nil {
		return err
	}
	switch b.drv.Dialect {
	case Postgres:
		tx, err := b.cfg.DB.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sql: ensure schema: %w", err)
		}
		defer tx.Rollback()
		sum := sha256.Sum256([]byte("baton schema " + b.cfg.Table))
		key := int64(binary.BigEndian.Uint64(sum[:8]))
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", key); err != nil {
			return fmt.Errorf("sql: ensure schema: lock: %w", err)
		}
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("sql: ensure schema: %w\n%s", err, s)
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sql: ensure schema: %w", err)
		}
	case MySQL:
		for _, s := range stmts {
			if _, err := b.cfg.DB.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("sql: ensure schema: %w\n%s", err, s)
			}
		}
		for _, c := range mysqlAddedColumns {
			if err := b.addColumn(ctx, c); err != nil {
				return err
			}
		}
	}
	return b.Check(ctx)
}

// addedColumn is a column a later version of the schema added to a
// table: tables created earlier lack it.
type addedColumn struct {
	suffix string // of the table: "_runs" for Table_runs
	name   string
	def    string // its type and default, for ADD COLUMN
}

// mysqlAddedColumns are the columns EnsureSchema adds on MySQL to tables
// created by an earlier schema file (postgres.sql does it with ALTER
// TABLE ... ADD COLUMN IF NOT EXISTS, which MySQL lacks).
var mysqlAddedColumns = []addedColumn{
	{"_runs", "attempts", "INT NOT NULL DEFAULT 0"},
}

// addColumn adds c to its table unless the table has it. Idempotent, also
// when several instances run it at once: whichever ALTER fails, the column
// is there if a read of it then succeeds.
func (b *Backend) addColumn(ctx context.Context, c addedColumn) error {
	table := b.cfg.Table + c.suffix
	probe := func() error {
		rows, err := b.cfg.DB.QueryContext(ctx, "SELECT "+c.name+" FROM "+table+" WHERE 1 = 0")
		if err == nil {
			err = rows.Close()
		}
		return err
	}
	if probe() == nil {
		return nil
	}
	alter := "ALTER TABLE " + table + " ADD COLUMN " + c.name + " " + c.def
	if _, err := b.cfg.DB.ExecContext(ctx, alter); err != nil && probe() != nil {
		return fmt.Errorf("sql: ensure schema: %w\n%s", err, alter)
	}
	b.log.Info("schema upgraded: column added", "table", table, "column", c.name)
	return nil
}

// Check verifies that every table (and the sequence or counter table) of
// the schema exists with the expected columns. It returns every missing
// relation at once, each wrapping ErrSchemaMissing and naming the relation
// and the schema file to apply; any other error (connection, TLS,
// authentication, privileges) is returned alone, at the first statement. It blocks on the database, bounded by ctx and
// QueryTimeout per statement. New does not call it: call it at start-up
// to fail fast.
func (b *Backend) Check(ctx context.Context) error {
	var errs []error
	for _, c := range b.q.checks {
		qctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
		rows, err := b.cfg.DB.QueryContext(qctx, c.query)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		cancel()
		if err != nil {
			if !b.drv.schemaMissing(err) {
				// Not about this relation (no connection, TLS, password,
				// permissions): every other check would fail the same way.
				return b.wrap("check "+c.relation, err)
			}
			errs = append(errs, b.wrap("check "+c.relation, err))
		}
	}
	return errors.Join(errs...)
}
