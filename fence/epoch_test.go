package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/internal/dbtest"
)

// counter is a token counter in a table, as a SQL backend keeps one: an
// auto-increment that starts over at 1 when the table is recreated.
type counter struct {
	t    *testing.T
	r    *rig
	name string
}

func (c *counter) create() {
	q := "CREATE TABLE " + c.name + " (id bigserial PRIMARY KEY)"
	if c.r.guard.Dialect == fence.MySQL {
		q = "CREATE TABLE " + c.name + " (id bigint AUTO_INCREMENT PRIMARY KEY)"
	}
	if _, err := c.r.db.Exec(q); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _, _ = c.r.db.Exec("DROP TABLE IF EXISTS " + c.name) })
}

// recreate drops and creates the counter's table: tokens start over.
func (c *counter) recreate() {
	if _, err := c.r.db.Exec("DROP TABLE " + c.name); err != nil {
		c.t.Fatal(err)
	}
	c.create()
}

// next returns the next token.
func (c *counter) next() uint64 {
	var id int64
	var err error
	if c.r.guard.Dialect == fence.Postgres {
		err = c.r.db.QueryRow("INSERT INTO " + c.name + " DEFAULT VALUES RETURNING id").Scan(&id)
	} else {
		var res sql.Result
		if res, err = c.r.db.Exec("INSERT INTO " + c.name + " () VALUES ()"); err == nil {
			id, err = res.LastInsertId()
		}
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return uint64(id)
}

// A recreated counter table restarts the tokens below the fence: a new
// epoch is recognised, the old epoch's late writes are refused; without
// a new epoch every write is refused until the operator's Reset.
func TestSQL_TokensStartOver(t *testing.T) {
	for _, d := range []dbtest.Dialect{dbtest.Postgres, dbtest.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			ctx := context.Background()
			r := newRig(t, d, sql.LevelReadCommitted)
			c := &counter{t: t, r: r, name: r.data + "_ctr"}
			c.create()
			at := func(epoch, n uint64) fence.Token { return fence.Token{Election: "reports", Epoch: epoch, N: n} }
			var last uint64
			for range 3 {
				last = c.next()
				for _, res := range []string{"epoch", "reset"} {
					if err := r.write(ctx, res, at(1, last)); err != nil {
						t.Fatal(err)
					}
				}
			}
			c.recreate()
			first := c.next()
			if first >= last {
				t.Fatalf("the recreated counter gave %d; want below %d", first, last)
			}

			// Same epoch: the guard cannot tell a restart from a stale write.
			err := r.write(ctx, "reset", at(1, first))
			if !errors.Is(err, fence.ErrStale) {
				t.Fatalf("token %d after %d, same epoch: %v; want ErrStale", first, last, err)
			}
			t.Logf("same epoch, before the reset: %v", err)
			if err := r.guard.Reset(ctx, r.db, "reset"); err != nil {
				t.Fatal(err)
			}
			if err := r.write(ctx, "reset", at(1, first)); err != nil {
				t.Errorf("token %d after the reset: %v", first, err)
			}

			// A new epoch starts a new fence at the restarted token ...
			if err := r.write(ctx, "epoch", at(2, first)); err != nil {
				t.Fatalf("epoch 2 token %d after epoch 1 token %d: %v; want a new fence", first, last, err)
			}
			// ... and the old counter's late write is refused.
			err = r.write(ctx, "epoch", at(1, last+1))
			if !errors.Is(err, fence.ErrStale) {
				t.Errorf("epoch 1 token %d after epoch 2 token %d: %v; want ErrStale", last+1, first, err)
			}
			t.Logf("old epoch after the new: %v", err)
			if err := r.write(ctx, "epoch", at(2, c.next())); err != nil {
				t.Errorf("epoch 2's next token: %v", err)
			}
			if f, ok, err := r.guard.Read(ctx, r.db, "epoch"); err != nil || !ok || f.Epoch != 2 || f.N != first+1 {
				t.Errorf("fence = %v, %v, %v; want epoch 2 token %d", f, ok, err, first+1)
			}
		})
	}
}
