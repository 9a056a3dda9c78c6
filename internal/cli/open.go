package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/hashicorp/consul/api"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backends/etcd"
	batonredis "github.com/batonhq/baton/backends/redis"
	batonsql "github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/backends/sql/mysql"
	"github.com/batonhq/baton/backends/sql/postgres"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Opened is a backend ready to campaign on. Close it when done.
type Opened struct {
	Backend election.Backend
	Ledger  ledger.Ledger // nil if the backend has none
	Control control.Store // the election's control store; nil if the backend has none
	Where   string        // what an operator looks at: prefix, key, table+row
	close   func()
}

// Close closes the backend's client or database handle. It does not
// release a lease; the Elector does that.
func (o *Opened) Close() { o.close() }

// Open connects to the backend the flags name, with timing t and (SQL
// followers) poll interval poll, without campaigning. It blocks while it
// connects; SQL backends also create their table if missing. Zero t and
// poll mean the backend's defaults.
func (b *BackendFlags) Open(ctx context.Context, t election.Timing, poll time.Duration, log *slog.Logger) (*Opened, error) {
	if b.Election == "" {
		return nil, errors.New("--election: required")
	}
	var o *Opened
	switch b.Kind {
	case "etcd":
		ecfg, err := b.etcdConfig()
		if err != nil {
			return nil, err
		}
		cli, err := b.openEtcd(ctx, ecfg)
		if err != nil {
			return nil, err
		}
		be, err := etcd.New(etcd.Config{Client: cli, Prefix: b.etcdPrefix(), Timing: t, Logger: log})
		if err != nil {
			cli.Close()
			return nil, err
		}
		o = &Opened{Backend: be, Where: "etcd prefix " + b.etcdPrefix(), close: func() { cli.Close() }}
	case "postgres", "mysql":
		if b.dsn == "" {
			return nil, fmt.Errorf("--dsn: required with --backend %s", b.Kind)
		}
		var (
			db  *sql.DB
			drv batonsql.Driver
		)
		cfg := batonsql.Config{Table: b.table, Election: b.Election, Timing: t, PollInterval: poll, Logger: log}
		if b.Kind == "postgres" {
			cc, err := pgx.ParseConfig(b.dsn)
			if err != nil {
				return nil, fmt.Errorf("--dsn: %w", err)
			}
			if cc.ConnectTimeout == 0 {
				cc.ConnectTimeout = 5 * time.Second
			}
			db = stdlib.OpenDB(*cc)
			drv = postgres.Driver(func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cc.Copy()) })
		} else {
			mc, err := mysqldriver.ParseDSN(b.dsn)
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
			conn, err := mysqldriver.NewConnector(mc)
			if err != nil {
				return nil, fmt.Errorf("--dsn: %w", err)
			}
			db = sql.OpenDB(conn)
			drv = mysql.Driver()
		}
		cfg.DB = db
		be, err := batonsql.New(cfg, drv)
		if err != nil {
			db.Close()
			return nil, err
		}
		if err := b.ensureSQL(ctx, db, be); err != nil {
			db.Close()
			return nil, err
		}
		o = &Opened{Backend: be, Where: fmt.Sprintf("%s table %s, election %q", b.Kind, b.table, b.Election), close: func() { db.Close() }}
	case "consul":
		cc, err := b.consulConfig()
		if err != nil {
			return nil, err
		}
		cli, err := api.NewClient(cc)
		if err != nil {
			return nil, fmt.Errorf("consul: %w", err)
		}
		be, err := consul.New(consul.Config{Client: cli, Key: b.consulLockKey(), Timing: t, Logger: log})
		if err != nil {
			return nil, err
		}
		o = &Opened{Backend: be, Where: "consul key " + b.consulLockKey(), close: func() {}}
	case "redis":
		rcfg, err := b.redisConfig()
		if err != nil {
			return nil, err
		}
		rcfg.Timing, rcfg.Logger = t, log
		quietRedisClient(log)
		be, err := batonredis.New(rcfg)
		if err != nil {
			return nil, err
		}
		o = &Opened{Backend: be, Where: "redis key " + be.LeaseKey() + " at " + be.Servers(), close: func() { be.Close() }}
	case "kube":
		be, err := b.openKube(t, log)
		if err != nil {
			return nil, err
		}
		o = &Opened{Backend: be, Where: "kube Lease " + be.LeaseName(), close: func() {}}
	default:
		return nil, fmt.Errorf("--backend %q: want etcd, postgres, mysql, consul, redis or kube", b.Kind)
	}
	if l, ok := o.Backend.(driver.Ledgerer); ok {
		o.Ledger = l.Ledger()
	}
	if c, ok := o.Backend.(driver.Controller); ok {
		o.Control = c.Control()
	}
	return o, nil
}

// redisConfig is the Redis backend configuration the flags describe,
// without timing and logger.
func (b *BackendFlags) redisConfig() (batonredis.Config, error) {
	cfg := batonredis.Config{Addr: b.redisAddr, MasterName: b.redisMaster, Username: b.redisUser, Election: b.Election, WaitReplicas: b.redisWaitReplicas}
	if b.redisSentinel != "" {
		cfg.SentinelAddrs = strings.Split(b.redisSentinel, ",")
	}
	if b.redisCluster != "" {
		cfg.ClusterAddrs = strings.Split(b.redisCluster, ",")
	}
	if cfg.Addr == "" && cfg.SentinelAddrs == nil && cfg.ClusterAddrs == nil {
		cfg.Addr = DefaultRedisAddr
	}
	switch {
	case b.redisPasswordFile != "":
		pw, err := readSecret("redis-password-file", b.redisPasswordFile)
		if err != nil {
			return cfg, err
		}
		cfg.Password = pw
	default:
		cfg.Password = os.Getenv(RedisPasswordEnv)
		if b.redisUser != "" && cfg.Password == "" {
			return cfg, fmt.Errorf("--redis-username %s: the password is missing: give --redis-password-file or set %s", b.redisUser, RedisPasswordEnv)
		}
	}
	switch {
	case (b.redisSentinelUser != "" || b.redisSentinelPasswordFile != "") && b.redisSentinel == "":
		return cfg, errors.New("--redis-sentinel-username, --redis-sentinel-password-file: they need --redis-sentinel")
	case b.redisSentinelPasswordFile != "":
		pw, err := readSecret("redis-sentinel-password-file", b.redisSentinelPasswordFile)
		if err != nil {
			return cfg, err
		}
		cfg.SentinelPassword = pw
	case b.redisSentinel != "":
		cfg.SentinelPassword = os.Getenv(RedisSentinelPasswordEnv)
		if b.redisSentinelUser != "" && cfg.SentinelPassword == "" {
			return cfg, fmt.Errorf("--redis-sentinel-username %s: the password is missing: give --redis-sentinel-password-file or set %s", b.redisSentinelUser, RedisSentinelPasswordEnv)
		}
	}
	cfg.SentinelUsername = b.redisSentinelUser
	if (b.redisCert == "") != (b.redisKey == "") {
		return cfg, errors.New("--redis-cert and --redis-key: give both or neither")
	}
	if b.redisTLS || b.redisCACert != "" || b.redisCert != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if b.redisCACert != "" {
			pem, err := os.ReadFile(b.redisCACert)
			if err != nil {
				return cfg, fmt.Errorf("--redis-cacert: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return cfg, fmt.Errorf("--redis-cacert %s: no PEM certificate in it", b.redisCACert)
			}
		}
		if b.redisCert != "" {
			cert, err := tls.LoadX509KeyPair(b.redisCert, b.redisKey)
			if err != nil {
				return cfg, fmt.Errorf("--redis-cert, --redis-key: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		cfg.TLS = tc
	}
	return cfg, nil
}
