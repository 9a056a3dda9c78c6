package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/consul/api"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backends/sqlrow"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// backendFlags are the flags naming a backend and an election, shared by
// `demo node` and `demo history`.
type backendFlags struct {
	kind       string
	endpoints  string
	dsn        string
	table      string
	consulAddr string
	election   string
}

func (b *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.kind, "backend", "etcd", "backend: etcd, postgres, mysql or consul")
	fs.StringVar(&b.endpoints, "endpoints", "http://127.0.0.1:2379", "etcd: comma-separated client URLs")
	fs.StringVar(&b.dsn, "dsn", "", "postgres: URL such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable;\nmysql: DSN such as root@tcp(127.0.0.1:3306)/test")
	fs.StringVar(&b.table, "table", "baton_lease", "postgres, mysql: lease table (created if missing)")
	fs.StringVar(&b.consulAddr, "consul-addr", "127.0.0.1:8500", "consul: agent HTTP address")
	fs.StringVar(&b.election, "election", "demo", "election name")
}

// etcdPrefix is the key prefix of an election on etcd.
func etcdPrefix(name string) string {
	if strings.HasPrefix(name, "/") {
		return strings.TrimSuffix(name, "/")
	}
	return "/baton/elections/" + name
}

// consulKey is the lock key of an election on Consul.
func consulKey(name string) string { return "service/baton/" + name + "/leader" }

// opened is a backend ready to campaign on.
type opened struct {
	backend election.Backend
	ledger  schedulerhost.Ledger // nil if the backend has none
	where   string               // what an operator looks at: prefix, key, table+row
	close   func()
}

// ledgerer is implemented by backends that keep a tick ledger.
type ledgerer interface {
	Ledger() schedulerhost.Ledger
}

// open connects to the backend (without campaigning) with timing t.
func (b *backendFlags) open(ctx context.Context, t election.Timing, poll time.Duration, log *slog.Logger) (*opened, error) {
	if b.election == "" {
		return nil, errors.New("--election: required")
	}
	var o *opened
	switch b.kind {
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:            strings.Split(b.endpoints, ","),
			DialTimeout:          5 * time.Second,
			DialKeepAliveTime:    5 * time.Second,
			DialKeepAliveTimeout: 2 * time.Second,
			Logger:               nopZap(),
		})
		if err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
		be, err := etcd.New(etcd.Config{Client: cli, Prefix: etcdPrefix(b.election), Timing: t, Logger: log})
		if err != nil {
			cli.Close()
			return nil, err
		}
		o = &opened{backend: be, where: "etcd prefix " + etcdPrefix(b.election), close: func() { cli.Close() }}
	case "postgres", "mysql":
		if b.dsn == "" {
			return nil, fmt.Errorf("--dsn: required with --backend %s", b.kind)
		}
		var db *sql.DB
		cfg := sqlrow.Config{Table: b.table, Election: b.election, Timing: t, PollInterval: poll, Logger: log}
		if b.kind == "postgres" {
			cc, err := pgx.ParseConfig(b.dsn)
			if err != nil {
				return nil, fmt.Errorf("--dsn: %w", err)
			}
			if cc.ConnectTimeout == 0 {
				cc.ConnectTimeout = 5 * time.Second
			}
			db = stdlib.OpenDB(*cc)
			cfg.Dialect = sqlrow.Postgres
			cfg.Listen = func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cc.Copy()) }
		} else {
			mc, err := mysql.ParseDSN(b.dsn)
			if err != nil {
				return nil, fmt.Errorf("--dsn: %w", err)
			}
			mc.ParseTime = true
			if mc.Timeout == 0 {
				mc.Timeout = 5 * time.Second
			}
			if mc.ReadTimeout == 0 {
				mc.ReadTimeout = 30 * time.Second
			}
			if mc.WriteTimeout == 0 {
				mc.WriteTimeout = 30 * time.Second
			}
			conn, err := mysql.NewConnector(mc)
			if err != nil {
				return nil, fmt.Errorf("--dsn: %w", err)
			}
			db = sql.OpenDB(conn)
			cfg.Dialect = sqlrow.MySQL
		}
		cfg.DB = db
		be, err := sqlrow.New(cfg)
		if err != nil {
			db.Close()
			return nil, err
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = be.EnsureSchema(sctx)
		cancel()
		if err != nil {
			db.Close()
			return nil, err
		}
		o = &opened{backend: be, where: fmt.Sprintf("%s table %s, election %q", b.kind, b.table, b.election), close: func() { db.Close() }}
	case "consul":
		cc := api.DefaultConfig()
		cc.Address = b.consulAddr
		cli, err := api.NewClient(cc)
		if err != nil {
			return nil, fmt.Errorf("consul: %w", err)
		}
		be, err := consul.New(consul.Config{Client: cli, Key: consulKey(b.election), Timing: t, Logger: log})
		if err != nil {
			return nil, err
		}
		o = &opened{backend: be, where: "consul key " + consulKey(b.election), close: func() {}}
	default:
		return nil, fmt.Errorf("--backend %q: want etcd, postgres, mysql or consul", b.kind)
	}
	if l, ok := o.backend.(ledgerer); ok {
		o.ledger = l.Ledger()
	}
	return o, nil
}
