package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Dialect names the SQL server a guard speaks to.
type Dialect string

// The dialects. MySQL covers MariaDB; both need InnoDB tables.
const (
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql"
)

// DefaultTable is the fence table's name when SQL.Table is empty.
const DefaultTable = "baton_fence"

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// SQL is the guard for PostgreSQL and MySQL/MariaDB. It keeps one row per
// (election, resource) in its table: the epoch and token of the newest
// write. Check runs in the caller's transaction, before or after the
// caller's own writes, and refuses an older token: the caller rolls back,
// and its writes never commit. Its row stays locked until the transaction
// ends, so writers of one resource take turns.
//
// What each database needs:
//
//   - PostgreSQL, any isolation level. Check is one conditional upsert
//     (INSERT ... ON CONFLICT DO UPDATE ... WHERE). At READ COMMITTED it
//     waits for a concurrent writer of the row and compares with the row
//     as that writer committed it. At REPEATABLE READ and SERIALIZABLE a
//     row changed after the transaction's snapshot makes PostgreSQL abort
//     with a serialization failure (SQLSTATE 40001): Check returns an
//     error wrapping ErrRetry, and a retry compares with the new row.
//   - MySQL and MariaDB, InnoDB, any isolation level. Check takes the row
//     with an upsert and reads it with SELECT ... FOR UPDATE: a locking
//     read sees the latest committed row even at REPEATABLE READ, and the
//     row stays locked until commit. Concurrent first writes of a new row
//     can deadlock in InnoDB (error 1213): Check returns ErrRetry. The
//     caller's other statements must not have read the fence row with a
//     plain SELECT to decide anything.
//
// A SQL guard is safe for concurrent use.
type SQL struct {
	Dialect  Dialect
	Table    string // DefaultTable when empty; letters, digits, _, one optional schema dot
	Election string // the election whose tokens this guard accepts
}

func (g *SQL) table() (string, error) {
	t := g.Table
	if t == "" {
		t = DefaultTable
	}
	if !tableName.MatchString(t) {
		return "", fmt.Errorf("%w: SQL.Table %q: want letters, digits and _ (and one schema dot)", ErrInvalid, t)
	}
	if g.Dialect != Postgres && g.Dialect != MySQL {
		return "", fmt.Errorf("%w: SQL.Dialect %q: want %q or %q", ErrInvalid, g.Dialect, Postgres, MySQL)
	}
	return t, nil
}

// Querier is what Check and Read run on: a *sql.Tx (or a *sql.DB, for
// Read and Reset).
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Migrate creates the fence table if it does not exist. Run it once
// before the first Check, as part of the application's migrations; the
// statement it runs is MigrationSQL's.
func (g *SQL) Migrate(ctx context.Context, db Querier) error {
	q, err := g.MigrationSQL()
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("fence: create table: %w", err)
	}
	return nil
}

// MigrationSQL returns the CREATE TABLE statement of the fence table, for
// a migration tool.
func (g *SQL) MigrationSQL() (string, error) {
	t, err := g.table()
	if err != nil {
		return "", err
	}
	if g.Dialect == Postgres {
		return "CREATE TABLE IF NOT EXISTS " + t + ` (
  election text NOT NULL,
  resource text NOT NULL,
  epoch bigint NOT NULL,
  token bigint NOT NULL,
  PRIMARY KEY (election, resource))`, nil
	}
	return "CREATE TABLE IF NOT EXISTS " + t + ` (
  election varchar(191) NOT NULL,
  resource varchar(191) NOT NULL,
  epoch bigint NOT NULL,
  token bigint NOT NULL,
  PRIMARY KEY (election, resource)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`, nil
}

// Check records tok as the newest write to resource, in tx, and returns
// nil; or, when the fence holds a newer token, a *StaleError (ErrStale),
// and the caller must roll back. A token equal to the fence's passes: a
// term may write many times. A greater epoch starts a new fence at its
// token. Errors: ErrOtherElection when tok is not of g.Election, ErrRetry
// on a serialization failure or deadlock, ErrInvalid for bad input.
func (g *SQL) Check(ctx context.Context, tx Querier, resource string, tok Token) error {
	t, err := g.table()
	if err != nil {
		return err
	}
	if err := check(g.Election, resource, tok); err != nil {
		return err
	}
	if g.Dialect == Postgres {
		return g.checkPostgres(ctx, tx, t, resource, tok)
	}
	return g.checkMySQL(ctx, tx, t, resource, tok)
}

func (g *SQL) checkPostgres(ctx context.Context, tx Querier, t, resource string, tok Token) error {
	var epoch, n int64
	err := tx.QueryRowContext(ctx, `INSERT INTO `+t+` AS f (election, resource, epoch, token) VALUES ($1, $2, $3, $4)
ON CONFLICT (election, resource) DO UPDATE SET epoch = EXCLUDED.epoch, token = EXCLUDED.token
WHERE (f.epoch, f.token) <= (EXCLUDED.epoch, EXCLUDED.token)
RETURNING f.epoch, f.token`, g.Election, resource, int64(tok.Epoch), int64(tok.N)).Scan(&epoch, &n)
	if errors.Is(err, sql.ErrNoRows) {
		// Refused: the row is locked by the upsert; read it for the error.
		if err := tx.QueryRowContext(ctx, `SELECT epoch, token FROM `+t+` WHERE election = $1 AND resource = $2`,
			g.Election, resource).Scan(&epoch, &n); err != nil {
			return g.dbErr("read fence", resource, err)
		}
		return &StaleError{Resource: resource, Token: tok, Fence: Token{Election: g.Election, Epoch: uint64(epoch), N: uint64(n)}}
	}
	if err != nil {
		return g.dbErr("check", resource, err)
	}
	return nil
}

func (g *SQL) checkMySQL(ctx context.Context, tx Querier, t, resource string, tok Token) error {
	// The upsert takes the row's exclusive lock (inserting it with tok
	// when new); the locking read sees the latest committed row.
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+t+` (election, resource, epoch, token) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE token = token`, g.Election, resource, int64(tok.Epoch), int64(tok.N)); err != nil {
		return g.dbErr("check", resource, err)
	}
	var epoch, n int64
	if err := tx.QueryRowContext(ctx, `SELECT epoch, token FROM `+t+` WHERE election = ? AND resource = ? FOR UPDATE`,
		g.Election, resource).Scan(&epoch, &n); err != nil {
		return g.dbErr("read fence", resource, err)
	}
	fence := Token{Election: g.Election, Epoch: uint64(epoch), N: uint64(n)}
	if tok.Less(fence) {
		return &StaleError{Resource: resource, Token: tok, Fence: fence}
	}
	if fence == tok {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+t+` SET epoch = ?, token = ? WHERE election = ? AND resource = ?`,
		int64(tok.Epoch), int64(tok.N), g.Election, resource); err != nil {
		return g.dbErr("advance", resource, err)
	}
	return nil
}

// Read returns the fence of resource: the newest token written, and
// false when no write has been fenced yet.
func (g *SQL) Read(ctx context.Context, q Querier, resource string) (Token, bool, error) {
	t, err := g.table()
	if err != nil {
		return Token{}, false, err
	}
	var epoch, n int64
	err = q.QueryRowContext(ctx, g.bind(`SELECT epoch, token FROM `+t+` WHERE election = ? AND resource = ?`),
		g.Election, resource).Scan(&epoch, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, false, nil
	}
	if err != nil {
		return Token{}, false, g.dbErr("read fence", resource, err)
	}
	return Token{Election: g.Election, Epoch: uint64(epoch), N: uint64(n)}, true, nil
}

// Reset deletes the fence of resource: the operator's remedy when the
// election's token counter started over below the fence without a new
// epoch (a recreated table or terms object, a flushed Redis, a move to
// another backend). Until then every write is refused as stale. Make
// sure the old term's processes are gone first: the next write of any
// token is accepted.
func (g *SQL) Reset(ctx context.Context, q Querier, resource string) error {
	t, err := g.table()
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, g.bind(`DELETE FROM `+t+` WHERE election = ? AND resource = ?`), g.Election, resource); err != nil {
		return g.dbErr("reset", resource, err)
	}
	return nil
}

// bind turns ? placeholders into PostgreSQL's $n.
func (g *SQL) bind(q string) string {
	if g.Dialect != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sqlStater is pgx's *pgconn.PgError, matched by its method so that no
// driver is linked.
type sqlStater interface{ SQLState() string }

func (g *SQL) dbErr(what, resource string, err error) error {
	if retryable(err) {
		return fmt.Errorf("%w: %s resource %q: %w", ErrRetry, what, resource, err)
	}
	return fmt.Errorf("fence: %s resource %q: %w", what, resource, err)
}

func retryable(err error) bool {
	var s sqlStater
	if errors.As(err, &s) {
		switch s.SQLState() {
		case "40001", "40P01": // serialization failure, deadlock detected
			return true
		}
	}
	// The MySQL driver's error has a Number field and no method to read
	// it: match its text, "Error 1213 (40001): Deadlock found ...".
	msg := err.Error()
	for _, code := range []string{"Error 1213", "Error 1205", "(40001)"} {
		if strings.Contains(msg, code) {
			return true
		}
	}
	return false
}
