// Package dbtest gives tests the shared PostgreSQL and MariaDB (or MySQL)
// servers: where they are (BATON_TEST_POSTGRES_DSN, BATON_TEST_MYSQL_DSN,
// or the defaults that CI provides), an admin pool that has answered a
// ping, fresh names, so that tests running side by side never share a
// table, and the drop of a baton table with the tables and sequence
// derived from its name.
//
// An unreachable server is reported as envtest.ErrUnavailable by Open, and
// by OpenT as a loud skip, or a failure under BATON_TEST_REQUIRE=1.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/batonhq/baton/internal/envtest"
)

// Dialect names a database server kind.
type Dialect string

// The dialects, named as the demo's --backend flag names them.
const (
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql"
)

// The servers the tests use when the environment names none: the local
// PostgreSQL (user postgres, trust) and MariaDB (root, no password), each
// with a database "test".
const (
	DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test?parseTime=true"
)

// pingTimeout bounds Open's check that the server answers.
const pingTimeout = 3 * time.Second

// DSN returns the data source name of the dialect's test server:
// $BATON_TEST_POSTGRES_DSN or $BATON_TEST_MYSQL_DSN, else the default.
func DSN(d Dialect) string {
	if d == Postgres {
		return envtest.Getenv("BATON_TEST_POSTGRES_DSN", DefaultPostgresDSN)
	}
	return envtest.Getenv("BATON_TEST_MYSQL_DSN", DefaultMySQLDSN)
}

// Server is a test database server that has answered a ping.
type Server struct {
	Dialect Dialect
	// DSN is the data source name Admin was opened with (see DSN).
	DSN string
	// Addr is the server's host:port, where a proxy in front of it
	// forwards to.
	Addr string
	// DBName is the database the DSN names.
	DBName string
	// Admin is a pool on DSN, for schema work, hand edits and faults. It
	// is closed by Close.
	Admin *sql.DB
}

// Open opens an admin pool on the dialect's test server and pings it
// (bounded by 3 s and ctx). If the server does not answer, the error wraps
// envtest.ErrUnavailable. The caller closes the Server.
func Open(ctx context.Context, d Dialect) (*Server, error) {
	s := &Server{Dialect: d, DSN: DSN(d)}
	driver := "mysql"
	switch d {
	case Postgres:
		cc, err := pgx.ParseConfig(s.DSN)
		if err != nil {
			return nil, fmt.Errorf("dbtest: %s: %w", d, err)
		}
		s.Addr = net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
		s.DBName, driver = cc.Database, "pgx"
	case MySQL:
		mc, err := mysql.ParseDSN(s.DSN)
		if err != nil {
			return nil, fmt.Errorf("dbtest: %s: %w", d, err)
		}
		s.Addr, s.DBName = mc.Addr, mc.DBName
	default:
		return nil, fmt.Errorf("dbtest: unknown dialect %q", d)
	}
	db, err := sql.Open(driver, s.DSN)
	if err != nil {
		return nil, fmt.Errorf("dbtest: %s: %w", d, err)
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	err = db.PingContext(pctx)
	cancel()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %s %s: %v", envtest.ErrUnavailable, d, s.DSN, err)
	}
	s.Admin = db
	return s, nil
}

// OpenT is Open for a test: an unreachable server skips t loudly (fails it
// under BATON_TEST_REQUIRE=1), any other error fails it, and the Server is
// closed when t ends.
func OpenT(t testing.TB, d Dialect) *Server {
	t.Helper()
	s, err := Open(context.Background(), d)
	if err != nil {
		if errors.Is(err, envtest.ErrUnavailable) {
			envtest.Unavailable(t, "%v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Close closes the admin pool.
func (s *Server) Close() error { return s.Admin.Close() }

// NewName returns prefix followed by 8 random hex digits: a table, user or
// application name that no other test run uses.
func NewName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// DropTables drops the baton table named table and what the schema
// derives from its name: the _ticks, _runs and _control tables, the
// control store's _control_seq sequence (PostgreSQL), and the token
// sequence (PostgreSQL's _token_seq sequence, MySQL's _seq table). Missing
// ones are no error. Cleanup code may ignore the error.
func (s *Server) DropTables(ctx context.Context, table string) error {
	stmts := []string{"DROP TABLE IF EXISTS " + table + "_control, " + table + "_runs, " + table + "_ticks, " + table}
	if s.Dialect == Postgres {
		stmts = append(stmts, "DROP SEQUENCE IF EXISTS "+table+"_token_seq, "+table+"_control_seq")
	} else {
		stmts[0] += ", " + table + "_seq"
	}
	for _, q := range stmts {
		if _, err := s.Admin.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("dbtest: %s: %w", q, err)
		}
	}
	return nil
}
