// Command fencewriter is the job of the e2e fencing scenario
// (e2e/fence_test.go): a command job that writes its term's token to a
// PostgreSQL table, through package fence's SQL guard or, with
// -guard=false, without it.
//
// It reads BATON_TOKEN, BATON_ELECTION and BATON_INSTANCE, connects, and
// appends "about TOKEN PID INSTANCE" to the events file: the write is
// now on its way. It then holds the write until the file HOLD/go.TOKEN
// exists (the test's hand on a write in flight: it pauses the process
// here, as a GC pause or a VM migration would), and writes in one
// transaction: the guard's check (unless -guard=false), the state row
// (id 1) set to its token, and a row appended to the writes log. Last it
// appends "wrote TOKEN PID" or "refused TOKEN PID REASON" and exits 0 or
// 3 (refused).
//
// usage: fencewriter -dsn DSN -table T -events FILE -hold DIR [-guard=false]
//
// Tables (the test creates them): T (id int primary key, token bigint,
// instance text), T_writes (seq bigserial, token bigint, instance text),
// and the guard's fence table T_fence (fence.SQL.MigrationSQL).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/batonhq/baton/fence"
)

func main() {
	dsn := flag.String("dsn", "", "PostgreSQL data source name")
	table := flag.String("table", "", "the state table; its log is TABLE_writes, its fence TABLE_fence")
	events := flag.String("events", "", "file the lines about, wrote and refused are appended to")
	hold := flag.String("hold", "", "directory where go.TOKEN releases the write")
	guard := flag.Bool("guard", true, "check the token with fence's SQL guard in the write's transaction")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	code, err := run(ctx, *dsn, *table, *events, *hold, *guard)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencewriter:", err)
	}
	os.Exit(code)
}

func run(ctx context.Context, dsn, table, events, hold string, guard bool) (int, error) {
	if dsn == "" || table == "" || events == "" || hold == "" {
		return 2, errors.New("-dsn, -table, -events and -hold are required")
	}
	n, err := strconv.ParseUint(os.Getenv("BATON_TOKEN"), 10, 64)
	if err != nil {
		return 2, fmt.Errorf("BATON_TOKEN %q: %v", os.Getenv("BATON_TOKEN"), err)
	}
	tok := fence.Token{Election: os.Getenv("BATON_ELECTION"), N: n}
	inst := os.Getenv("BATON_INSTANCE")
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return 2, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		return 2, err
	}
	pid := os.Getpid()
	if err := appendLine(events, "about %d %d %s", n, pid, inst); err != nil {
		return 2, err
	}
	if err := waitFile(ctx, filepath.Join(hold, "go."+strconv.FormatUint(n, 10))); err != nil {
		return 2, err
	}
	err = write(ctx, db, table, tok, inst, guard)
	if errors.Is(err, fence.ErrStale) {
		return 3, appendLine(events, "refused %d %d %v", n, pid, err)
	}
	if err != nil {
		return 1, err
	}
	return 0, appendLine(events, "wrote %d %d", n, pid)
}

// write runs the guarded (or unguarded) write in one transaction.
func write(ctx context.Context, db *sql.DB, table string, tok fence.Token, inst string, guard bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if guard {
		g := &fence.SQL{Dialect: fence.Postgres, Table: table + "_fence", Election: tok.Election}
		if err := g.Check(ctx, tx, "state", tok); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (id, token, instance) VALUES (1, $1, $2)
ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token, instance = EXCLUDED.instance`, int64(tok.N), inst); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+`_writes (token, instance) VALUES ($1, $2)`, int64(tok.N), inst); err != nil {
		return err
	}
	return tx.Commit()
}

// waitFile returns once path exists, or with ctx's error.
func waitFile(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// appendLine appends one line to path with a single O_APPEND write.
func appendLine(path, format string, args ...any) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, format+"\n", args...)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
