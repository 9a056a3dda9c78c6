package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/fence"
)

// begin opens a transaction of the old writer that has read the data
// row already: its snapshot (REPEATABLE READ, SERIALIZABLE) predates
// what follows.
func (r *rig) begin(t *testing.T, resource string) *sql.Tx {
	t.Helper()
	tx, err := r.db.BeginTx(context.Background(), &sql.TxOptions{Isolation: r.iso})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if r.guard.Dialect == fence.MySQL && r.iso == sql.LevelSerializable {
		// InnoDB's SERIALIZABLE makes this read a shared lock, which a
		// newer writer would wait for: that interleaving cannot happen.
		return tx
	}
	q := "SELECT count(*) FROM " + r.data + " WHERE resource = ?"
	if r.guard.Dialect == fence.Postgres {
		q = "SELECT count(*) FROM " + r.data + " WHERE resource = $1"
	}
	var n int
	if err := tx.QueryRow(q, resource).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return tx
}

// finish checks tok in tx and writes; it returns the guard's error.
func (r *rig) finish(tx *sql.Tx, resource string, tok fence.Token) error {
	ctx := context.Background()
	if err := r.guard.Check(ctx, tx, resource, tok); err != nil {
		_ = tx.Rollback()
		return err
	}
	if _, err := tx.ExecContext(ctx, r.upsert(), resource, int64(tok.N)); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return errors.Join(fence.ErrRetry, err)
	}
	return nil
}

// refusedOrRetry asserts that the old writer's err is a refusal, or a
// retry whose retried write is refused; and that the resource holds want.
func (r *rig) refusedOrRetry(t *testing.T, err error, resource string, old fence.Token, want uint64) {
	t.Helper()
	if errors.Is(err, fence.ErrRetry) {
		t.Logf("old writer's first attempt: %v", err)
		err, _ = retried(func() error { return r.write(context.Background(), resource, old) })
	}
	if !errors.Is(err, fence.ErrStale) {
		t.Errorf("old writer (token %d): %v; want fence.ErrStale", old.N, err)
	}
	if got, err := r.read(context.Background(), resource); err != nil || got != want {
		t.Errorf("resource holds token %d (%v); want %d", got, err, want)
	}
}

// Every interleaving of two writers, n and n+1, that the test can force.
func TestSQL_Interleavings(t *testing.T) {
	for _, c := range sqlCases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.d, c.iso)
			ctx := context.Background()

			// 1. The newer commits before the older begins.
			res := fencetestResource("seq")
			if err := r.write(ctx, res, tok(5)); err != nil {
				t.Fatal(err)
			}
			if err := r.write(ctx, res, tok(6)); err != nil {
				t.Fatal(err)
			}
			r.refusedOrRetry(t, r.write(ctx, res, tok(5)), res, tok(5), 6)

			// 2. The older begins (and reads) first, the newer commits,
			// then the older's write arrives late.
			res = fencetestResource("late")
			if err := r.write(ctx, res, tok(5)); err != nil {
				t.Fatal(err)
			}
			old := r.begin(t, res)
			if err := r.write(ctx, res, tok(7)); err != nil {
				t.Fatal(err)
			}
			r.refusedOrRetry(t, r.finish(old, res, tok(6)), res, tok(6), 7)

			// 3. The newer has checked, not committed; the older's check
			// waits for its row lock, and is refused once it commits.
			res = fencetestResource("wait")
			newer := r.begin(t, res)
			if err := r.guard.Check(ctx, newer, res, tok(9)); err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			tx := r.begin(t, res)
			go func() { errc <- r.finish(tx, res, tok(8)) }()
			time.Sleep(100 * time.Millisecond) // let the older reach the lock; either order is checked
			if _, err := newer.ExecContext(ctx, r.upsert(), res, 9); err != nil {
				t.Fatal(err)
			}
			if err := newer.Commit(); err != nil {
				t.Fatal(err)
			}
			r.refusedOrRetry(t, <-errc, res, tok(8), 9)

			// 4. The older checks first and commits: it was not stale
			// then; the newer follows, and the older again is refused.
			res = fencetestResource("first")
			older := r.begin(t, res)
			if err := r.guard.Check(ctx, older, res, tok(3)); err != nil {
				t.Fatal(err)
			}
			go func() { errc <- r.write(ctx, res, tok(4)) }()
			time.Sleep(100 * time.Millisecond)
			if err := r.finish(older, res, tok(3)); err != nil {
				t.Fatalf("older first: %v", err)
			}
			if err := <-errc; errors.Is(err, fence.ErrRetry) {
				// A retry of the newer after a serialization failure.
				if err, _ := retried(func() error { return r.write(ctx, res, tok(4)) }); err != nil {
					t.Fatalf("newer after older, retried: %v", err)
				}
			} else if err != nil {
				t.Fatalf("newer after older: %v", err)
			}
			r.refusedOrRetry(t, r.write(ctx, res, tok(3)), res, tok(3), 4)

			// 5. A fence of another election is never compared.
			if err := r.write(ctx, res, fence.Token{Election: "billing", N: 100}); !errors.Is(err, fence.ErrOtherElection) {
				t.Errorf("token of election billing: %v; want ErrOtherElection", err)
			}
		})
	}
}

func fencetestResource(p string) string { return "job-status-" + p }
