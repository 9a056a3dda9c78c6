package sql_test

import (
	"context"
	dbsql "database/sql"
	"database/sql/driver"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/backends/sql/mysql"
	"github.com/batonhq/baton/backends/sql/postgres"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/dbtest"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/proxytest"
)

// The tests of this package run every behaviour against both servers, so
// they take each dialect's Driver from its package: the one place where
// backends/sql (its tests only) imports backends/sql/postgres and
// backends/sql/mysql. They stay here, not in a third folder, because they
// skew the Backend's wall clock through SetWallClock (export_test.go),
// which only this package's tests can reach.

// testTTL is the lease TTL of the tests; pgPoll and myPoll are their
// polling intervals on each server (PostgreSQL also LISTENs).
const (
	testTTL = 2 * time.Second
	pgPoll  = 500 * time.Millisecond
	myPoll  = 250 * time.Millisecond
)

// server is one database server the tests run against.
type server struct {
	name    string
	dialect sql.Dialect
	target  string // host:port of the server
	poll    time.Duration
	admin   *dbsql.DB      // direct, for schema and hand edits: db.Admin
	db      *dbtest.Server // the server as internal/dbtest opened it
	kind    dbtest.Dialect // which of dbtest's servers it is

	// connector dials addr (a proxy, or target) with the session time
	// zone tz ("" for the server's).
	connector func(addr, tz string) driver.Connector
	// listen returns a postgres.Config.Listen dialing addr (PostgreSQL
	// only).
	listen func(addr, tz string) func(context.Context) (*pgx.Conn, error)
	// driver returns the dialect package's Driver, with listen (nil: poll
	// only) on PostgreSQL.
	driver func(listen func(context.Context) (*pgx.Conn, error)) sql.Driver
}

var (
	serversOnce sync.Once
	servers     = map[string]*server{}
	serverErrs  = map[string]error{}
)

func loadServers() {
	for name, load := range map[string]func() (*server, error){"postgres": postgresServer, "mariadb": mariadbServer} {
		s, err := load()
		if err == nil {
			s.db, err = dbtest.Open(context.Background(), s.kind)
		}
		if err != nil {
			serverErrs[name] = err
			continue
		}
		s.admin = s.db.Admin
		servers[name] = s
	}
}

// postgresServer describes the PostgreSQL server of BATON_TEST_POSTGRES_DSN
// (admin not yet open).
func postgresServer() (*server, error) {
	cfg, err := pgx.ParseConfig(dbtest.DSN(dbtest.Postgres))
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 2 * time.Second
	withAddr := func(addr, tz string) *pgx.ConnConfig {
		c := cfg.Copy()
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		c.Host, c.Port, c.Fallbacks = host, uint16(p), nil
		if tz != "" {
			c.RuntimeParams["timezone"] = tz
		}
		return c
	}
	return &server{
		name:      "postgres",
		dialect:   sql.Postgres,
		kind:      dbtest.Postgres,
		target:    net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))),
		poll:      pgPoll,
		driver:    postgres.Driver,
		connector: func(addr, tz string) driver.Connector { return stdlib.GetConnector(*withAddr(addr, tz)) },
		listen: func(addr, tz string) func(context.Context) (*pgx.Conn, error) {
			return func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, withAddr(addr, tz)) }
		},
	}, nil
}

// mariadbServer describes the MariaDB (or MySQL) server of
// BATON_TEST_MYSQL_DSN (admin not yet open).
func mariadbServer() (*server, error) {
	cfg, err := mysqldriver.ParseDSN(dbtest.DSN(dbtest.MySQL))
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 2 * time.Second
	cfg.ReadTimeout = 10 * time.Second
	cfg.WriteTimeout = 10 * time.Second
	return &server{
		name:    "mariadb",
		dialect: sql.MySQL,
		kind:    dbtest.MySQL,
		target:  cfg.Addr,
		poll:    myPoll,
		driver:  func(func(context.Context) (*pgx.Conn, error)) sql.Driver { return mysql.Driver() },
		connector: func(addr, tz string) driver.Connector {
			c := cfg.Clone()
			c.Addr = addr
			if tz != "" {
				if c.Params == nil {
					c.Params = map[string]string{}
				}
				c.Params["time_zone"] = "'" + tz + "'"
			}
			conn, err := mysqldriver.NewConnector(c)
			if err != nil {
				panic(err)
			}
			return conn
		},
	}, nil
}

// open returns a pool dialing addr (a proxy) with the session time zone
// tz ("" for the server's).
func (s *server) open(addr, tz string) *dbsql.DB { return dbsql.OpenDB(s.connector(addr, tz)) }

// getServer returns the named server or skips (fails under
// BATON_TEST_REQUIRE=1) if it is unreachable.
func getServer(t *testing.T, name string) *server {
	t.Helper()
	serversOnce.Do(loadServers)
	s := servers[name]
	if s == nil {
		envtest.Unavailable(t, "%s: %v", name, serverErrs[name])
	}
	return s
}

// forEachServer runs f as parallel subtests "postgres" and "mariadb".
func forEachServer(t *testing.T, f func(t *testing.T, s *server)) {
	for _, name := range []string{"postgres", "mariadb"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, getServer(t, name))
		})
	}
}

// randomTable returns a table name no other test run uses.
func randomTable() string { return dbtest.NewName("baton_t_") }

// newTable creates the schema of a fresh table (EnsureSchema through the
// admin pool) and drops it when t ends.
func (s *server) newTable(t *testing.T) string {
	t.Helper()
	table := randomTable()
	b := s.backend(t, s.admin, table, "schema", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.EnsureSchema(ctx); err != nil {
		t.Fatalf("EnsureSchema: %v", err)
	}
	t.Cleanup(func() { s.dropTable(t, table) })
	return table
}

func (s *server) dropTable(t *testing.T, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.db.DropTables(ctx, table); err != nil {
		t.Errorf("drop %s: %v", table, err)
	}
}

// testConfig is what a test may change of a Backend's settings: the
// shared Config and, on PostgreSQL, the LISTEN connection.
type testConfig struct {
	sql.Config
	Listen func(context.Context) (*pgx.Conn, error)
}

// backend builds a Backend on db with the test timing, through the
// dialect package's Driver (so that tests can skew the wall clock of the
// shared Config).
func (s *server) backend(t *testing.T, db *dbsql.DB, table, electionName string, mod func(*testConfig)) *sql.Backend {
	t.Helper()
	cfg := testConfig{Config: sql.Config{
		DB:           db,
		Table:        table,
		Election:     electionName,
		Timing:       election.Timing{TTL: testTTL},
		PollInterval: s.poll,
		Logger:       testLogger(t),
	}}
	if mod != nil {
		mod(&cfg)
	}
	b, err := sql.New(cfg.Config, s.driver(cfg.Listen))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// candidate is a Backend with its own pool (and listen connection) dialing
// through a proxy of its own.
type candidate struct {
	*sql.Backend
	proxy *proxytest.Proxy
	db    *dbsql.DB
}

type candOpts struct {
	timing *election.Timing // nil: TTL testTTL
	tz     string           // session time zone
	wall   func() time.Time // skewed application wall clock
	noWait bool             // PostgreSQL: no LISTEN
}

func (s *server) candidate(t *testing.T, table, electionName string, o candOpts) *candidate {
	t.Helper()
	p, err := proxytest.New(s.target)
	if err != nil {
		t.Fatal(err)
	}
	db := s.open(p.Addr(), o.tz)
	t.Cleanup(func() {
		p.Heal()
		db.Close()
		p.Close()
	})
	b := s.backend(t, db, table, electionName, func(c *testConfig) {
		if s.listen != nil && !o.noWait {
			c.Listen = s.listen(p.Addr(), o.tz)
		}
		if o.wall != nil {
			sql.SetWallClock(&c.Config, o.wall)
		}
		if o.timing != nil {
			c.Timing = *o.timing
		}
	})
	return &candidate{Backend: b, proxy: p, db: db}
}

// leader returns a fresh table, a candidate of its election electionName
// and that candidate's lease as "a", released when t ends.
func (s *server) leader(t *testing.T, electionName string) (string, *candidate, election.Lease) {
	t.Helper()
	table := s.newTable(t)
	a := s.candidate(t, table, electionName, candOpts{})
	la := acquire(t, a, "a")
	t.Cleanup(func() { release(t, la) })
	return table, a, la
}

// testLogger logs to stderr at the level BATON_TEST_LOG names (debug,
// info, warn; default: errors only), tagged with the test name.
func testLogger(t *testing.T) *slog.Logger {
	level := slog.LevelError
	_ = level.UnmarshalText([]byte(os.Getenv("BATON_TEST_LOG")))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("test", t.Name())
}
