package main

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/backends/redis"
	batonsql "github.com/batonhq/baton/backends/sql"
	batonmysql "github.com/batonhq/baton/backends/sql/mysql"
	"github.com/batonhq/baton/backends/sql/postgres"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/kubetest"
	"github.com/batonhq/baton/ledger"
)

// ledgerConn is one connection to a backend for a ledger trial.
type ledgerConn struct {
	backend election.Backend
	ledger  ledger.Ledger
	close   func()
}

// openLedger connects to backend through addr (a countProxy), in an
// election of its own (lane).
func openLedger(e *env, backend, addr, lane string) (*ledgerConn, error) {
	timing := election.Timing{TTL: 10 * time.Second}
	var b election.Backend
	closeFn := func() {}
	switch backend {
	case "etcd":
		cli, err := e.etcdClient(addr)
		if err != nil {
			return nil, err
		}
		eb, err := etcd.New(etcd.Config{Client: cli, Prefix: "/benchledger/" + lane, Timing: timing, Logger: quiet})
		if err != nil {
			cli.Close()
			return nil, err
		}
		b, closeFn = eb, func() { cli.Close() }
	case "consul":
		cli, err := e.consul.Client(addr)
		if err != nil {
			return nil, err
		}
		cb, err := consul.New(consul.Config{Client: cli, Key: "benchledger/" + lane + "/leader", Timing: timing, Logger: quiet})
		if err != nil {
			return nil, err
		}
		b = cb
	case "postgres", "mariadb":
		var db *sql.DB
		var err error
		var drv batonsql.Driver
		if backend == "postgres" {
			db, err = e.openPG(addr)
			drv = postgres.Driver(e.pgListen(addr))
		} else {
			db, err = e.openMy(addr)
			drv = batonmysql.Driver()
		}
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(32)
		db.SetMaxIdleConns(32)
		sb, err := batonsql.New(batonsql.Config{DB: db, Table: e.sqlTable, Election: lane, Timing: timing, Logger: quiet}, drv)
		if err != nil {
			db.Close()
			return nil, err
		}
		b, closeFn = sb, func() { db.Close() }
	case "redis":
		rb, err := redis.New(redis.Config{Addr: addr, Election: "benchledger/" + lane, Timing: timing, Logger: quiet})
		if err != nil {
			return nil, err
		}
		b, closeFn = rb, func() { rb.Close() }
	case "kube":
		if e.kube == nil {
			return nil, fmt.Errorf("kube: no API server: %v", e.kubeErr)
		}
		cli, err := kube.NewClient(kube.ClientConfig{Server: "https://" + addr, Token: kubetest.Token, CAFile: e.kube.CAFile})
		if err != nil {
			return nil, err
		}
		kb, err := kube.New(kube.Config{Client: cli, Name: kubeName("ledger-" + lane), Timing: timing, Logger: quiet})
		if err != nil {
			return nil, err
		}
		b, closeFn = kb, cli.CloseIdleConnections
	default:
		return nil, fmt.Errorf("unknown backend %q", backend)
	}
	lb, ok := b.(driver.Ledgerer)
	if !ok {
		closeFn()
		return nil, fmt.Errorf("%s: no ledger", backend)
	}
	return &ledgerConn{backend: b, ledger: lb.Ledger(), close: closeFn}, nil
}

func protoOf(backend string) string {
	switch backend {
	case "etcd":
		return "h2"
	case "consul":
		return "http"
	case "postgres":
		return "pg"
	case "redis":
		return "redis"
	case "kube":
		return "" // TLS: the proxy passes it on, uncounted
	default:
		return "mysql"
	}
}

func (e *env) targetOf(backend string) string {
	switch backend {
	case "etcd":
		return e.etcdAddr
	case "consul":
		return e.consul.HTTPAddr
	case "postgres":
		return e.pgTarget()
	case "redis":
		return e.redis.Addr()
	case "kube":
		return e.kubeAddr()
	default:
		return e.myCfg.Addr
	}
}
