package e2e

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/batonhq/baton/backends/consul/consultest"
	"github.com/batonhq/baton/backends/etcd/etcdtest"
	"github.com/batonhq/baton/e2e/internal/consulsrv"
	"github.com/batonhq/baton/internal/testenv"
)

// backend is one backend under test: a server the test owns (or a table
// and a user of its own on a shared database server), reached by every
// node through its own proxy.
type backend struct {
	name   string
	target string // host:port the proxies forward to
	nodes  int
	ttl    time.Duration
	poll   time.Duration // SQL followers' poll interval; zero elsewhere
	grace  time.Duration // misfire grace of the jobs: covers a failover
	// crashBound is the documented crash failover bound (DESIGN rule 7),
	// reported next to the measured maximum.
	crashBound time.Duration
	// handoverBound bounds a graceful handover: release to next term.
	handoverBound time.Duration
	// args are the backend flags of `demo node` for a node whose proxy
	// listens on addr.
	args func(addr string) []string
	// restart is the backend-restart fault; restartKind says what it does.
	restart     func(ctx context.Context) error
	restartKind string
	close       func()
}

// errUnavailable marks a server that cannot be reached: the test skips
// (or fails under BATON_TEST_REQUIRE=1).
var errUnavailable = errors.New("unavailable")

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newBackend(ctx context.Context, name, dir string) (*backend, error) {
	switch name {
	case "etcd":
		return newEtcd(dir)
	case "postgres":
		return newPostgres(ctx)
	case "mysql", "mariadb":
		return newMySQL(ctx)
	case "consul":
		return newConsul(ctx, dir)
	}
	return nil, fmt.Errorf("unknown backend %q (want etcd, postgres, mysql, consul)", name)
}

func newEtcd(dir string) (*backend, error) {
	srv, err := etcdtest.StartDir(filepath.Join(dir, "etcd"))
	if err != nil {
		return nil, err
	}
	ttl := 3 * time.Second
	return &backend{
		name: "etcd", target: srv.Addr(), nodes: 4, ttl: ttl, grace: 30 * time.Second,
		crashBound: ttl + time.Second, handoverBound: time.Second,
		args: func(addr string) []string {
			return []string{"--backend", "etcd", "--endpoints", "http://" + addr}
		},
		restart:     func(context.Context) error { return srv.Restart() },
		restartKind: "embedded etcd member stopped and started on the same data dir",
		close:       srv.Stop,
	}, nil
}

// openAdmin opens the database/sql pool of driver on dsn, for the test's
// own statements, and pings it; a server that does not answer is
// errUnavailable.
func openAdmin(ctx context.Context, name, driver, dsn string) (*sql.DB, error) {
	admin, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = admin.PingContext(pctx)
	cancel()
	if err != nil {
		admin.Close()
		return nil, fmt.Errorf("%w: %s %s: %v", errUnavailable, name, dsn, err)
	}
	return admin, nil
}

func newPostgres(ctx context.Context) (*backend, error) {
	dsn := testenv.Getenv("BATON_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	admin, err := openAdmin(ctx, "postgres", "pgx", dsn)
	if err != nil {
		return nil, err
	}
	id := randHex(4)
	table, app := "baton_e2e_"+id, "baton_e2e_"+id
	u, err := url.Parse(dsn)
	if err != nil {
		admin.Close()
		return nil, err
	}
	ttl, poll := 3*time.Second, 250*time.Millisecond
	return &backend{
		name: "postgres", target: net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))), nodes: 4, ttl: ttl, poll: poll,
		grace: 30 * time.Second, crashBound: ttl + poll, handoverBound: time.Second + poll,
		args: func(addr string) []string {
			v := *u
			v.Host = addr
			q := v.Query()
			q.Set("application_name", app)
			v.RawQuery = q.Encode()
			return []string{"--backend", "postgres", "--dsn", v.String(), "--table", table}
		},
		restart: func(ctx context.Context) error {
			_, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
			return err
		},
		restartKind: "pg_terminate_backend of every connection of the nodes (application_name " + app + ")",
		close: func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, q := range []string{"DROP TABLE IF EXISTS %s_runs", "DROP TABLE IF EXISTS %s_ticks", "DROP TABLE IF EXISTS %s", "DROP SEQUENCE IF EXISTS %s_token_seq"} {
				_, _ = admin.ExecContext(cctx, fmt.Sprintf(q, table))
			}
			admin.Close()
		},
	}, nil
}

func newMySQL(ctx context.Context) (*backend, error) {
	dsn := testenv.Getenv("BATON_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test?parseTime=true")
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	admin, err := openAdmin(ctx, "mysql", "mysql", dsn)
	if err != nil {
		return nil, err
	}
	id := randHex(4)
	table, user := "baton_e2e_"+id, "baton_e2e_"+id
	// A user of its own, so that the backend-restart fault kills exactly
	// the nodes' connections.
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%'", user),
		fmt.Sprintf("CREATE USER '%s'@'localhost'", user),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'%%'", mc.DBName, user),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'localhost'", mc.DBName, user),
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			admin.Close()
			return nil, fmt.Errorf("mysql: %s: %w", q, err)
		}
	}
	ttl, poll := 3*time.Second, 250*time.Millisecond
	return &backend{
		name: "mysql", target: mc.Addr, nodes: 4, ttl: ttl, poll: poll,
		grace: 30 * time.Second, crashBound: ttl + poll, handoverBound: time.Second + poll,
		args: func(addr string) []string {
			c := mysql.NewConfig()
			c.User, c.Net, c.Addr, c.DBName, c.ParseTime = user, "tcp", addr, mc.DBName, true
			return []string{"--backend", "mysql", "--dsn", c.FormatDSN(), "--table", table}
		},
		restart: func(ctx context.Context) error {
			rows, err := admin.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?`, user)
			if err != nil {
				return err
			}
			var ids []int64
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
			}
			rows.Close()
			for _, id := range ids {
				_, _ = admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)) // may be gone already
			}
			return nil
		},
		restartKind: "KILL CONNECTION of every connection of the nodes (user " + user + ")",
		close: func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, q := range []string{"DROP TABLE IF EXISTS %s_runs", "DROP TABLE IF EXISTS %s_ticks", "DROP TABLE IF EXISTS %s", "DROP TABLE IF EXISTS %s_seq"} {
				_, _ = admin.ExecContext(cctx, fmt.Sprintf(q, table))
			}
			_, _ = admin.ExecContext(cctx, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user))
			_, _ = admin.ExecContext(cctx, fmt.Sprintf("DROP USER IF EXISTS '%s'@'localhost'", user))
			admin.Close()
		},
	}, nil
}

func newConsul(ctx context.Context, dir string) (*backend, error) {
	bin, err := consultest.Binary()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	srv, err := consulsrv.Start(ctx, bin, filepath.Join(dir, "consul"))
	if err != nil {
		return nil, err
	}
	ttl := 10 * time.Second
	return &backend{
		name: "consul", target: srv.HTTPAddr, nodes: 3, ttl: ttl, grace: 60 * time.Second,
		// Consul reaps a session at 2*TTL, then keeps the key for the
		// lock-delay: the TTL (the default), so that a deregistered node's
		// session cannot free it while its leader still leads.
		crashBound: 2*ttl + ttl, handoverBound: 2 * time.Second,
		args: func(addr string) []string {
			return []string{"--backend", "consul", "--consul-addr", addr}
		},
		restart:     srv.Restart,
		restartKind: "Consul server agent (non-dev, data dir kept) stopped with SIGTERM and started again",
		close:       srv.Close,
	}, nil
}
