package dbtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/dbtest"
)

func TestNewName_FreshEachCall(t *testing.T) {
	a, b := dbtest.NewName("baton_t_"), dbtest.NewName("baton_t_")
	if a == b {
		t.Fatalf("two calls returned the same name %q", a)
	}
	if !strings.HasPrefix(a, "baton_t_") || len(a) != len("baton_t_")+8 {
		t.Fatalf("NewName = %q, want baton_t_ and 8 hex digits", a)
	}
}

// TestServer_DropTables creates the tables a baton table derives, drops
// them with DropTables and checks that none is left.
func TestServer_DropTables(t *testing.T) {
	for _, d := range []dbtest.Dialect{dbtest.Postgres, dbtest.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			s := dbtest.OpenT(t, d)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			table := dbtest.NewName("baton_t_")
			stmts := []string{
				"CREATE TABLE " + table + " (id INT)",
				"CREATE TABLE " + table + "_ticks (id INT)",
				"CREATE TABLE " + table + "_runs (id INT)",
			}
			if d == dbtest.Postgres {
				stmts = append(stmts, "CREATE SEQUENCE "+table+"_token_seq")
			} else {
				stmts = append(stmts, "CREATE TABLE "+table+"_seq (id INT)")
			}
			for _, q := range stmts {
				if _, err := s.Admin.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if err := s.DropTables(ctx, table); err != nil {
				t.Fatal(err)
			}
			if err := s.DropTables(ctx, table); err != nil {
				t.Fatalf("second DropTables: %v", err)
			}
			q := "SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE '" + table + "%'"
			if d == dbtest.Postgres {
				q = "SELECT COUNT(*) FROM pg_class WHERE relname LIKE '" + table + "%'"
			}
			var n int
			if err := s.Admin.QueryRowContext(ctx, q).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("%d relations named %s* left after DropTables", n, table)
			}
		})
	}
}
