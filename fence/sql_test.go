package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/fence/fencetest"
	"github.com/batonhq/baton/internal/dbtest"
)

// rig is a fence table and a data table (the user's resource: one row
// per resource holding the token of its last write) on a real server.
type rig struct {
	db    *sql.DB
	guard *fence.SQL
	data  string
	iso   sql.IsolationLevel
}

func newRig(t *testing.T, d dbtest.Dialect, iso sql.IsolationLevel) *rig {
	t.Helper()
	s := dbtest.OpenT(t, d)
	name := dbtest.NewName("fence_")
	r := &rig{db: s.Admin, data: name + "_data", iso: iso,
		guard: &fence.SQL{Dialect: fence.Dialect(d), Table: name, Election: "reports"}}
	ctx := context.Background()
	if err := r.guard.Migrate(ctx, s.Admin); err != nil {
		t.Fatal(err)
	}
	col := "text"
	if d == dbtest.MySQL {
		col = "varchar(191)"
	}
	if _, err := s.Admin.ExecContext(ctx, "CREATE TABLE "+r.data+" (resource "+col+" PRIMARY KEY, token bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.Admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name+", "+r.data) })
	s.Admin.SetMaxOpenConns(32)
	return r
}

func (r *rig) upsert() string {
	if r.guard.Dialect == fence.Postgres {
		return "INSERT INTO " + r.data + " (resource, token) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token"
	}
	return "INSERT INTO " + r.data + " (resource, token) VALUES (?, ?) ON DUPLICATE KEY UPDATE token = VALUES(token)"
}

// write is the user's guarded write: the fence check and the write of
// the data row in one transaction at the rig's isolation level.
func (r *rig) write(ctx context.Context, resource string, tok fence.Token) error {
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: r.iso})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := r.guard.Check(ctx, tx, resource, tok); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, r.upsert(), resource, int64(tok.N)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %w", fence.ErrRetry, err)
	}
	return nil
}

func (r *rig) read(ctx context.Context, resource string) (uint64, error) {
	q := "SELECT token FROM " + r.data + " WHERE resource = ?"
	if r.guard.Dialect == fence.Postgres {
		q = "SELECT token FROM " + r.data + " WHERE resource = $1"
	}
	var n int64
	err := r.db.QueryRowContext(ctx, q, resource).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return uint64(n), err
}

var sqlCases = []struct {
	name string
	d    dbtest.Dialect
	iso  sql.IsolationLevel
}{
	{"Postgres/ReadCommitted", dbtest.Postgres, sql.LevelReadCommitted},
	{"Postgres/RepeatableRead", dbtest.Postgres, sql.LevelRepeatableRead},
	{"Postgres/Serializable", dbtest.Postgres, sql.LevelSerializable},
	{"MariaDB/ReadCommitted", dbtest.MySQL, sql.LevelReadCommitted},
	{"MariaDB/RepeatableRead", dbtest.MySQL, sql.LevelRepeatableRead},
	{"MariaDB/Serializable", dbtest.MySQL, sql.LevelSerializable},
}

// The kit: ordered and concurrent writers, the resource holding the
// newest token's write.
func TestSQL_Kit(t *testing.T) {
	for _, c := range sqlCases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.d, c.iso)
			fencetest.Run(t, fencetest.Config{Election: "reports", Write: r.write, Read: r.read, Writers: 8, Rounds: 10})
		})
	}
}

// tok is a token of election "reports" at epoch 0.
func tok(n uint64) fence.Token { return fence.Token{Election: "reports", N: n} }

// retried runs write until it returns anything but ErrRetry, counting
// the retries.
func retried(write func() error) (err error, retries int) {
	for {
		if err = write(); !errors.Is(err, fence.ErrRetry) {
			return err, retries
		}
		retries++
	}
}
