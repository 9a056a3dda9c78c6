package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	batonsql "github.com/batonhq/baton/backends/sql"
	batonmysql "github.com/batonhq/baton/backends/sql/mysql"
	"github.com/batonhq/baton/backends/sql/postgres"
	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/kubetest"
	"github.com/batonhq/baton/internal/redistest"
)

// quiet is the logger every component under test gets: warnings and
// errors only, discarded, so that no per-run log line is written (the
// peers log nothing per run either).
var quiet = slog.New(slog.DiscardHandler)

// env holds the servers every measurement talks to, all on loopback.
type env struct {
	etcdAddr string
	etcdPID  int
	etcdCmd  *exec.Cmd
	etcdIn   io.WriteCloser

	consul *consultest.Agent

	// redis is a redis-server of the bench's own (never a shared one such
	// as 6379): a free loopback port, no persistence, stopped by close.
	redis    *redistest.Server
	redisDir string
	redisPID int // 0 if not found

	// kube is an etcd and kube-apiserver pair from .bin (nil when they
	// are not built: the Kubernetes rows are left out, and say so).
	kube    *kubetest.Server
	kubeErr error

	pgDSN    string // without host and port
	pg       *sql.DB
	myCfg    *mysql.Config
	my       *sql.DB
	sqlTable string
}

const (
	defaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable&connect_timeout=2"
	defaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test?parseTime=true"
)

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// etcdChild is the entry point of the child process that runs the
// embedded etcd server, so that its CPU time is its own.
func etcdChild(dir string) {
	s, err := etcdtest.StartDir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("ENDPOINT %s\n", s.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(eof) }()
	select {
	case <-sig:
	case <-eof:
	}
	s.Stop()
	os.RemoveAll(dir)
}

func startEnv(ctx context.Context, needConsul, needSQL bool) (*env, error) {
	e := &env{sqlTable: "baton_bench_lease"}
	// etcd in a child process (this binary, re-executed).
	dir, err := os.MkdirTemp("", "baton-bench-etcd-")
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "etcd-child", dir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	e.etcdCmd, e.etcdIn, e.etcdPID = cmd, in, cmd.Process.Pid
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ENDPOINT ") {
		e.close()
		return nil, fmt.Errorf("etcd child: %q %v", line, err)
	}
	e.etcdAddr = strings.TrimSpace(strings.TrimPrefix(line, "ENDPOINT "))

	if needConsul {
		a, err := consultest.Start(ctx, consultest.Options{})
		if err != nil {
			e.close()
			return nil, fmt.Errorf("consul: %w", err)
		}
		e.consul = a
		if dir, err := os.MkdirTemp("", "baton-bench-kube-"); err == nil {
			e.kube, e.kubeErr = kubetest.Start(ctx, dir, kubetest.Options{})
			if e.kubeErr != nil {
				os.RemoveAll(dir)
				fmt.Fprintf(os.Stderr, "bench: no Kubernetes rows: %v\n", e.kubeErr)
			}
		}
	}
	if e.redisDir, err = os.MkdirTemp("", "baton-bench-redis-"); err != nil {
		e.close()
		return nil, err
	}
	if e.redis, err = redistest.StartServer(e.redisDir, redistest.Options{}); err != nil {
		e.close()
		return nil, fmt.Errorf("redis: %w", err)
	}
	e.redisPID = childPID("redis-server")
	if needSQL {
		e.pgDSN = getenv("BATON_TEST_POSTGRES_DSN", defaultPostgresDSN)
		e.pg, err = e.openPG(e.pgTarget())
		if err == nil {
			err = pingDB(e.pg)
		}
		if err != nil {
			e.close()
			return nil, fmt.Errorf("postgres: %w", err)
		}
		e.myCfg, err = mysql.ParseDSN(getenv("BATON_TEST_MYSQL_DSN", defaultMySQLDSN))
		if err == nil {
			e.my, err = e.openMy(e.myCfg.Addr)
		}
		if err == nil {
			err = pingDB(e.my)
		}
		if err != nil {
			e.close()
			return nil, fmt.Errorf("mariadb: %w", err)
		}
		for _, d := range []struct {
			db  *sql.DB
			drv batonsql.Driver
		}{{e.pg, postgres.Driver(nil)}, {e.my, batonmysql.Driver()}} {
			b, err := batonsql.New(batonsql.Config{DB: d.db, Table: e.sqlTable, Election: "schema", Logger: quiet}, d.drv)
			if err == nil {
				err = b.EnsureSchema(ctx)
			}
			if err != nil {
				e.close()
				return nil, fmt.Errorf("%v schema: %w", d.drv.Dialect, err)
			}
		}
	}
	return e, nil
}

func pingDB(db *sql.DB) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func (e *env) pgConfig(addr string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(e.pgDSN)
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	cfg.Host, cfg.Port, cfg.Fallbacks = host, uint16(p), nil
	cfg.ConnectTimeout = 2 * time.Second
	return cfg, nil
}

func (e *env) pgTarget() string {
	cfg, err := pgx.ParseConfig(e.pgDSN)
	if err != nil {
		return "127.0.0.1:5432"
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

func (e *env) openPG(addr string) (*sql.DB, error) {
	cfg, err := e.pgConfig(addr)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*cfg), nil
}

func (e *env) pgListen(addr string) func(context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) {
		cfg, err := e.pgConfig(addr)
		if err != nil {
			return nil, err
		}
		return pgx.ConnectConfig(ctx, cfg)
	}
}

func (e *env) openMy(addr string) (*sql.DB, error) {
	c := e.myCfg.Clone()
	c.Addr = addr
	c.Timeout = 2 * time.Second
	c.ReadTimeout = 10 * time.Second
	c.WriteTimeout = 10 * time.Second
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

func (e *env) etcdClient(addr string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:            []string{addr},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	})
}

// etcdCPU is the CPU time (user + system) the etcd child has used.
func (e *env) etcdCPU() time.Duration { return procCPU(e.etcdPID) }

// redisCPU is the CPU time (user + system) the bench's redis-server has
// used, or 0 if its process is not found.
func (e *env) redisCPU() time.Duration { return procCPU(e.redisPID) }

// serverCPU is the CPU time of backend's server process, for the
// servers that run as children of this process (etcd, Redis); ok is
// false for the others.
func (e *env) serverCPU(backend string) (d time.Duration, ok bool) {
	switch backend {
	case "etcd":
		return e.etcdCPU(), true
	case "redis":
		return e.redisCPU(), e.redisPID != 0
	}
	return 0, false
}

// redisVersion returns the version of the redis-server in PATH, or "".
func redisVersion() string {
	bin, err := redistest.Binary()
	if err != nil {
		return ""
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return ""
}

// procStat returns the fields of /proc/PID/stat after the command.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return nil
	}
	return strings.Fields(s[i+2:])
}

// procCPU is the CPU time (user + system) process pid has used.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	f := procStat(pid)
	if len(f) < 13 {
		return 0
	}
	// fields after the command: state(0) ppid(1) ... utime(11) stime(12)
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// childPID returns the pid of a child process of this one whose command
// is comm, or 0.
func childPID(comm string) int {
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(b)) != comm {
			continue
		}
		if f := procStat(pid); len(f) > 1 && f[1] == me {
			return pid
		}
	}
	return 0
}

func (e *env) close() {
	if e.consul != nil {
		e.consul.Close()
	}
	if e.kube != nil {
		e.kube.Close()
	}
	if e.redis != nil {
		e.redis.Stop()
	}
	if e.redisDir != "" {
		os.RemoveAll(e.redisDir)
	}
	if e.pg != nil {
		e.pg.Close()
	}
	if e.my != nil {
		e.my.Close()
	}
	if e.etcdCmd != nil {
		e.etcdIn.Close()
		done := make(chan struct{})
		go func() { e.etcdCmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			e.etcdCmd.Process.Kill()
			<-done
		}
	}
}
