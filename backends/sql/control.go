package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// Control returns the election's control store (pauses, run-now
// requests, the instance registry; see package control): the rows of
// the election in the table Table + "_control" (see the schema files),
// one per entry.
//
// List is one statement (a key range: prefixes match literally). Delete
// is one statement. Put is one transaction of three to four statements
// and its commit: with a token, the lease row is share-locked and must
// hold that token unexpired by the database's clock (the check a ledger
// claim makes); the entry's row is locked and its version compared; a
// new version is taken (PostgreSQL: from the sequence Table +
// "_control_seq"; MySQL: from the row with id 2 of Table + "_seq") and
// the row written. Control writes are operators' actions and a few per
// run-now request, not per tick: the round trips are not batched.
func (b *Backend) Control() control.Store { return &controlStore{b: b} }

type controlStore struct{ b *Backend }

// ph returns the n-th placeholder of the dialect (1-based).
func (s *controlStore) ph(n int) string {
	if s.b.drv.Dialect == Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

func (s *controlStore) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	if err := control.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	t := s.b.cfg.Table
	q := "SELECT k, v, version FROM " + t + "_control WHERE election = " + s.ph(1)
	args := []any{s.b.cfg.Election}
	if prefix != "" {
		// Keys are printable ASCII (up to '~'): every key with the prefix
		// is below prefix + DEL.
		q += " AND k >= " + s.ph(2) + " AND k < " + s.ph(3)
		args = append(args, prefix, prefix+"\x7f")
	}
	rows, err := s.b.cfg.DB.QueryContext(ctx, q+" ORDER BY k", args...)
	if err != nil {
		return nil, s.b.wrap("control list", err)
	}
	defer rows.Close()
	var out []control.Entry
	for rows.Next() {
		var e control.Entry
		if err := rows.Scan(&e.Key, &e.Value, &e.Version); err != nil {
			return nil, fmt.Errorf("sql: control list: %w", err)
		}
		if e.Value == nil {
			e.Value = []byte{}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.b.wrap("control list", err)
	}
	return out, nil
}

func (s *controlStore) Put(ctx context.Context, p control.Put) (int64, error) {
	if err := control.CheckPut(p); err != nil {
		return 0, err
	}
	b := s.b
	t := b.cfg.Table
	// Cut mid-way, the transaction would keep its locks (a fenced put's
	// share lock on the lease row among them): it runs on a connection
	// of its own, guarded.
	conn, err := b.cfg.DB.Conn(ctx)
	if err != nil {
		return 0, b.wrap("control put", err)
	}
	defer conn.Close()
	defer b.guardIdle(ctx, conn)()
	tx, err := conn.BeginTx(ctx, &dbsql.TxOptions{Isolation: dbsql.LevelReadCommitted})
	if err != nil {
		return 0, b.wrap("control put", err)
	}
	defer tx.Rollback()
	if p.Token != 0 {
		q := b.q.leaseShare
		if b.drv.Dialect == Postgres {
			q = "SELECT token = $1 AND expires_at > clock_timestamp() FROM " + t + " WHERE election = $2 FOR SHARE"
		}
		var live bool
		err := tx.QueryRowContext(ctx, q, int64(p.Token), b.cfg.Election).Scan(&live)
		if errors.Is(err, dbsql.ErrNoRows) || (err == nil && !live) {
			return 0, fmt.Errorf("sql: control put %s with token %d: the term does not hold the election: %w", p.Key, p.Token, ledger.ErrStaleTerm)
		}
		if err != nil {
			return 0, b.wrap("control put", err)
		}
		if b.controlStep != nil {
			b.controlStep()
		}
	}
	lock := "SELECT version FROM " + t + "_control WHERE election = " + s.ph(1) + " AND k = " + s.ph(2) + " FOR UPDATE"
	var cur int64
	err = tx.QueryRowContext(ctx, lock, b.cfg.Election, p.Key).Scan(&cur)
	switch {
	case errors.Is(err, dbsql.ErrNoRows):
		cur = 0
	case err != nil:
		return 0, b.wrap("control put", err)
	}
	if p.IfVersion != control.AnyVersion && p.IfVersion != cur {
		return 0, fmt.Errorf("sql: control: %s at version %d: at %d (0: absent): %w", p.Key, p.IfVersion, cur, control.ErrVersionMismatch)
	}
	var ver int64
	if b.drv.Dialect == Postgres {
		err = tx.QueryRowContext(ctx, "SELECT nextval('"+t+"_control_seq')").Scan(&ver)
	} else {
		if _, err = tx.ExecContext(ctx, "INSERT INTO "+t+"_seq (id, token) VALUES (2, LAST_INSERT_ID(1)) ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)"); err == nil {
			err = tx.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&ver)
		}
	}
	if err != nil {
		return 0, b.wrap("control put: new version", err)
	}
	var write string
	if cur == 0 {
		// A row inserted meanwhile by another writer (not locked above,
		// as it did not exist) makes this insert fail with a duplicate
		// key: the entry changed.
		write = "INSERT INTO " + t + "_control (election, k, v, version) VALUES (" + s.ph(1) + ", " + s.ph(2) + ", " + s.ph(3) + ", " + s.ph(4) + ")"
		_, err = tx.ExecContext(ctx, write, b.cfg.Election, p.Key, p.Value, ver)
	} else {
		write = "UPDATE " + t + "_control SET v = " + s.ph(1) + ", version = " + s.ph(2) + " WHERE election = " + s.ph(3) + " AND k = " + s.ph(4)
		_, err = tx.ExecContext(ctx, write, p.Value, ver, b.cfg.Election, p.Key)
	}
	if err != nil {
		if isDuplicate(err) {
			return 0, fmt.Errorf("sql: control: %s made by another writer meanwhile: %w", p.Key, control.ErrVersionMismatch)
		}
		return 0, b.wrap("control put", err)
	}
	if err := tx.Commit(); err != nil {
		if isDuplicate(err) {
			return 0, fmt.Errorf("sql: control: %s made by another writer meanwhile: %w", p.Key, control.ErrVersionMismatch)
		}
		return 0, b.wrap("control put: commit", err)
	}
	return ver, nil
}

func (s *controlStore) Delete(ctx context.Context, key string, ifVersion int64) error {
	if err := control.CheckPut(control.Put{Key: key, IfVersion: ifVersion}); err != nil {
		return err
	}
	if ifVersion == 0 {
		return fmt.Errorf("sql: control: delete %s at version 0: %w", key, control.ErrVersionMismatch)
	}
	q := "DELETE FROM " + s.b.cfg.Table + "_control WHERE election = " + s.ph(1) + " AND k = " + s.ph(2)
	args := []any{s.b.cfg.Election, key}
	if ifVersion != control.AnyVersion {
		q += " AND version = " + s.ph(3)
		args = append(args, ifVersion)
	}
	res, err := s.b.cfg.DB.ExecContext(ctx, q, args...)
	if err != nil {
		return s.b.wrap("control delete", err)
	}
	if ifVersion != control.AnyVersion {
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sql: control delete %s: %w", key, err)
		} else if n == 0 {
			return fmt.Errorf("sql: control: delete %s at version %d: absent or at another: %w", key, ifVersion, control.ErrVersionMismatch)
		}
	}
	return nil
}

// isDuplicate reports whether err is a unique violation: PostgreSQL's
// SQLSTATE 23505, MySQL's error 1062.
func isDuplicate(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "23505") || strings.Contains(msg, "Error 1062")
}

// Fence implements control.Store: a Put with a token checks the term in
// its own transaction, so no write of an ended term can land later.
func (s *controlStore) Fence(ctx context.Context, token uint64) error { return nil }
