package sql_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"github.com/batonhq/baton/backends/sql/mysql"
	"github.com/batonhq/baton/backends/sql/postgres"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/certtest"
	"github.com/batonhq/baton/internal/dbtest"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/mariadbtest"
)

// sslConfig returns the pgx config of BATON_TEST_POSTGRES_DSN, a
// postgres:// URL, with sslmode set to mode (and no sslrootcert) and a
// connect timeout of 5 s.
func sslConfig(t *testing.T, mode string) *pgx.ConnConfig {
	t.Helper()
	u, err := url.Parse(dbtest.DSN(dbtest.Postgres))
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
			envtest.Unavailable(t, "PostgreSQL at %s does not accept TLS (ssl = off): %v", s.target, err)
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
// mysqldriver.RegisterTLSConfig). Against a MariaDB of the test's own,
// started with a certificate of a CA of its own (the shared server may
// have TLS off): two backends verifying the server's certificate against
// that CA campaign, hand over and claim ticks over TLS, and the server
// sees a TLS session; a client trusting another CA fails at Check with
// the certificate error.
func TestMySQL_TLS(t *testing.T) {
	t.Parallel() // most of a start is mariadb-install-db's wait
	srv := mariadbtest.StartWith(t, mariadbtest.Options{TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	trusting := registerTLS(t, srv.CA.Pool())
	table := randomTable()
	a := mysqlBackend(t, srv.DSN(trusting), table)
	if err := a.EnsureSchema(ctx); err != nil {
		t.Fatalf("EnsureSchema over TLS: %v", err)
	}
	db := openMySQL(t, srv.DSN(trusting))
	b := mysqlBackendOn(t, db, table)
	backendtest.RunSmoke(t, a, b, 20*time.Second)
	var vname, cipher string
	if err := db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&vname, &cipher); err != nil {
		t.Fatal(err)
	}
	if cipher == "" {
		t.Error("Ssl_cipher is empty: the session is not TLS")
	}
	t.Logf("Ssl_cipher=%s", cipher)

	other := certtest.New(t, "other", "nobody")
	wrong := mysqlBackend(t, srv.DSN(registerTLS(t, other.CA.Pool())), table)
	err := wrong.Check(ctx)
	if err == nil || (!strings.Contains(err.Error(), "x509") && !strings.Contains(err.Error(), "certificate")) {
		t.Errorf("Check trusting another CA: %v, want a certificate error", err)
	}
}

// TestMySQL_TLSRefusedByServer: tls=true against a server without TLS
// fails at Check with the driver's clear error, not a retry loop.
func TestMySQL_TLSRefusedByServer(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b := mysqlBackend(t, srv.DSN("true"), randomTable())
	if err := b.Check(ctx); !errors.Is(err, mysqldriver.ErrNoTLS) {
		t.Fatalf("Check with tls=true against a server without TLS: %v, want mysqldriver.ErrNoTLS", err)
	}
}

// registerTLS registers with the MySQL driver a TLS configuration that
// trusts only roots and checks the server's name against 127.0.0.1, and
// returns its tls= name.
func registerTLS(t *testing.T, roots *x509.CertPool) string {
	t.Helper()
	name := dbtest.NewName("baton-tls-")
	if err := mysqldriver.RegisterTLSConfig(name, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mysqldriver.DeregisterTLSConfig(name) })
	return name
}

func openMySQL(t *testing.T, dsn string) *dbsql.DB {
	t.Helper()
	c, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := mysqldriver.NewConnector(c)
	if err != nil {
		t.Fatal(err)
	}
	db := dbsql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

func mysqlBackend(t *testing.T, dsn, table string) *sql.Backend {
	t.Helper()
	return mysqlBackendOn(t, openMySQL(t, dsn), table)
}

func mysqlBackendOn(t *testing.T, db *dbsql.DB, table string) *sql.Backend {
	t.Helper()
	b, err := sql.New(sql.Config{
		DB: db, Table: table, Election: "tls",
		Timing: election.Timing{TTL: testTTL}, PollInterval: myPoll, Logger: testLogger(t),
	}, mysql.Driver())
	if err != nil {
		t.Fatal(err)
	}
	return b
}
