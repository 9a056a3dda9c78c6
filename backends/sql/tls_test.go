package sql_test

import (
	"context"
	"crypto/tls"
	dbsql "database/sql"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/backends/sql/postgres"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/testdb"
	"github.com/batonhq/baton/internal/testenv"
)

// sslConfig returns the pgx config of BATON_TEST_POSTGRES_DSN, a
// postgres:// URL, with sslmode set to mode (and no sslrootcert) and a
// connect timeout of 5 s.
func sslConfig(t *testing.T, mode string) *pgx.ConnConfig {
	t.Helper()
	u, err := url.Parse(testdb.DSN(testdb.Postgres))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("BATON_TEST_POSTGRES_DSN is not a postgres:// URL (%v); cannot set sslmode", err)
	}
	q := u.Query()
	q.Set("sslmode", mode)
	q.Del("sslrootcert")
	u.RawQuery = q.Encode()
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnectTimeout = 5 * time.Second
	return cfg
}

// TestPostgres_SSLModeRequire: with sslmode=require in the DSN, every
// connection of the backend (the pool and the LISTEN connection) is TLS,
// and two backends campaign, hand over and claim ticks over it. require
// encrypts without verifying the server's certificate; verify-full
// checks it against sslrootcert and the host name (below).
func TestPostgres_SSLModeRequire(t *testing.T) {
	s := getServer(t, "postgres")
	cfg := sslConfig(t, "require")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	probe, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		if strings.Contains(err.Error(), "refused TLS") || strings.Contains(err.Error(), "server refused") {
			testenv.Unavailable(t, "PostgreSQL at %s does not accept TLS (ssl = off): %v", s.target, err)
		}
		t.Fatalf("connect with sslmode=require: %v", err)
	}
	probe.Close(ctx)

	table := s.newTable(t)
	newBackend := func() (*sql.Backend, *dbsql.DB) {
		db := stdlib.OpenDB(*cfg.Copy())
		t.Cleanup(func() { db.Close() })
		listenTLS := make(chan bool, 8)
		b, err := postgres.New(postgres.Config{
			DB: db, Table: table, Election: "tls",
			Timing: election.Timing{TTL: testTTL}, PollInterval: pgPoll, Logger: testLogger(t),
			Listen: func(ctx context.Context) (*pgx.Conn, error) {
				c, err := pgx.ConnectConfig(ctx, cfg.Copy())
				if err == nil {
					_, ok := c.PgConn().Conn().(*tls.Conn)
					select {
					case listenTLS <- ok:
					default:
					}
				}
				return c, err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			close(listenTLS)
			for ok := range listenTLS {
				if !ok {
					t.Error("a LISTEN connection is not TLS")
				}
			}
		})
		return b, db
	}
	a, dbA := newBackend()
	b, _ := newBackend()
	backendtest.RunSmoke(t, a, b, 20*time.Second)

	// The server's own view of a pool connection.
	var ssl bool
	var version, cipher string
	if err := dbA.QueryRowContext(ctx, "SELECT ssl, version, cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl, &version, &cipher); err != nil {
		t.Fatal(err)
	}
	if !ssl {
		t.Fatal("pg_stat_ssl: the connection is not TLS")
	}
	t.Logf("pg_stat_ssl: ssl=%v version=%s cipher=%s", ssl, version, cipher)
}

// TestPostgres_SSLModeVerifyFull: verify-full checks the server's
// certificate against sslrootcert and the host name. Against a server
// whose certificate no trusted CA signed (this machine's Debian snakeoil
// certificate, self-signed for the machine's host name), Check fails at
// once with the certificate error, not a retry loop.
func TestPostgres_SSLModeVerifyFull(t *testing.T) {
	s := getServer(t, "postgres")
	cfg := sslConfig(t, "verify-full")
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	b := s.backend(t, db, randomTable(), "tls", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := b.Check(ctx)
	if err == nil {
		t.Skip("the server's certificate verifies against the system roots for this host: nothing to show")
	}
	t.Logf("Check: %v", err)
	if !strings.Contains(err.Error(), "x509") && !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Check error %q does not name the certificate problem", err)
	}
	if errors.Is(err, sql.ErrSchemaMissing) {
		t.Errorf("a TLS failure reported as a missing schema: %v", err)
	}
}

// TestMySQL_TLS: the MySQL/MariaDB driver takes TLS from the DSN's tls=
// parameter (true, skip-verify, preferred, or a name registered with
// mysqldriver.RegisterTLSConfig). When the server has TLS, two backends run
// over it; when it has not (MariaDB here reports have_ssl DISABLED), the
// test checks that tls=true fails at Check with the driver's clear error
// and skips, saying why.
func TestMySQL_TLS(t *testing.T) {
	s := getServer(t, "mariadb")
	var name, haveSSL string
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.admin.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'have_ssl'").Scan(&name, &haveSSL); err != nil {
		t.Fatal(err)
	}
	base, err := mysqldriver.ParseDSN(testdb.DSN(testdb.MySQL))
	if err != nil {
		t.Fatal(err)
	}
	open := func(tlsParam string) *dbsql.DB {
		c := base.Clone()
		c.TLSConfig = tlsParam
		c.ParseTime = true
		c.Timeout = 5 * time.Second
		parsed, err := mysqldriver.ParseDSN(c.FormatDSN()) // resolves tls= as the driver does
		if err != nil {
			t.Fatal(err)
		}
		conn, err := mysqldriver.NewConnector(parsed)
		if err != nil {
			t.Fatal(err)
		}
		db := dbsql.OpenDB(conn)
		t.Cleanup(func() { db.Close() })
		return db
	}
	if haveSSL != "YES" {
		b := s.backend(t, open("true"), randomTable(), "tls", nil)
		err := b.Check(ctx)
		if !errors.Is(err, mysqldriver.ErrNoTLS) {
			t.Fatalf("Check with tls=true against a server without TLS: %v, want mysqldriver.ErrNoTLS", err)
		}
		t.Skipf("%s at %s reports have_ssl=%s, so TLS sessions cannot be tested here; tls=true fails at Check with: %v", s.name, s.target, haveSSL, err)
	}
	table := s.newTable(t)
	a := s.backend(t, open("skip-verify"), table, "tls", nil)
	db := open("skip-verify")
	b := s.backend(t, db, table, "tls", nil)
	backendtest.RunSmoke(t, a, b, 20*time.Second)
	var vname, cipher string
	if err := db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&vname, &cipher); err != nil {
		t.Fatal(err)
	}
	if cipher == "" {
		t.Error("Ssl_cipher is empty: the session is not TLS")
	}
}
