package sql_test

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/dbtest"
	"github.com/batonhq/baton/ledger"
)

// A claim and a finish the server refuses for want of a privilege (taken
// away while the term leads) are marked ledger.ErrRefused: the Host does
// not ask them again, and counts them as refused.
func TestLedger_PrivilegeRevokedIsRefused(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		table := s.newTable(t)
		user, pass := dbtest.NewName("baton_u_"), "baton-pw"
		exec := func(q string) {
			t.Helper()
			if _, err := s.admin.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		var tables []string
		rows, err := s.admin.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_name LIKE '"+table+"%'")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, n)
		}
		rows.Close()
		if len(tables) == 0 {
			t.Fatalf("no tables of %s", table)
		}
		var db *dbsql.DB
		switch s.name {
		case "postgres":
			exec(fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", user, pass))
			t.Cleanup(func() {
				s.admin.Exec("DROP OWNED BY " + user)
				s.admin.Exec("DROP ROLE " + user)
			})
			exec("GRANT ALL ON ALL TABLES IN SCHEMA public TO " + user)
			exec("GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO " + user)
			cfg, err := pgx.ParseConfig(dbtest.DSN(dbtest.Postgres))
			if err != nil {
				t.Fatal(err)
			}
			cfg.User, cfg.Password = user, pass
			db = stdlib.OpenDB(*cfg)
		default:
			exec(fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, pass))
			t.Cleanup(func() { s.admin.Exec(fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
			for _, tb := range tables {
				exec(fmt.Sprintf("GRANT ALL ON %s TO '%s'@'%%'", tb, user))
			}
			cfg, err := mysqldriver.ParseDSN(dbtest.DSN(dbtest.MySQL))
			if err != nil {
				t.Fatal(err)
			}
			cfg.User, cfg.Passwd = user, pass
			conn, err := mysqldriver.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			db = dbsql.OpenDB(conn)
		}
		t.Cleanup(func() { db.Close() })

		b := s.backend(t, db, table, "refused", nil)
		lease, err := b.Acquire(ctx, election.Identity{ID: "a"})
		if err != nil {
			t.Fatalf("Acquire as %s: %v", user, err)
		}
		defer lease.Release(context.Background())
		l := b.Ledger()
		tick := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
		if err := l.Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick, Token: lease.Token(), Instance: "a", Started: tick}})[0]; err != nil {
			t.Fatalf("claim with every privilege: %v", err)
		}
		for _, tb := range tables {
			if s.name == "postgres" {
				exec(fmt.Sprintf("REVOKE INSERT, UPDATE ON %s FROM %s", tb, user))
			} else {
				exec(fmt.Sprintf("REVOKE INSERT, UPDATE ON %s FROM '%s'@'%%'", tb, user))
			}
		}
		err = l.Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick.Add(time.Second), Token: lease.Token(), Instance: "a", Started: tick}})[0]
		if !errors.Is(err, ledger.ErrRefused) {
			t.Errorf("claim without INSERT and UPDATE: %v, want ErrRefused", err)
		}
		err = l.Finish(ctx, []ledger.Run{{Job: "j", Tick: tick, Token: lease.Token(), Instance: "a", Started: tick, Ended: tick, Result: ledger.ResultOK}})[0]
		if !errors.Is(err, ledger.ErrRefused) {
			t.Errorf("finish without UPDATE: %v, want ErrRefused", err)
		}
		if err != nil && !strings.Contains(err.Error(), "denied") && !strings.Contains(err.Error(), "42501") {
			t.Errorf("finish's error %q names no denial", err)
		}
	})
}
