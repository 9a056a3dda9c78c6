package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/batonhq/baton/e2e/internal/history"
	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/dbtest"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/redistest"
)

// backend is one backend under test: a server or a cluster the test owns
// (or a table and a user of its own on a shared database server), reached
// by every node through proxies of its own.
type backend struct {
	name     string
	topology string // what runs, for the report
	target   string // host:port the proxies forward to, unless targets is set
	// targets, if set, are the servers node slot i talks to, one proxy
	// each: every member of a cluster, or the slot's own client agent.
	targets func(i int) []string
	nodes   int
	ttl     time.Duration
	poll    time.Duration // SQL followers' poll interval; zero elsewhere
	grace   time.Duration // misfire grace of the jobs: covers a failover
	// crashBound is the documented crash failover bound (DESIGN rule 7),
	// reported next to the measured maximum.
	crashBound time.Duration
	// handoverBound bounds a graceful handover: release to next term. It
	// includes reconnectAllowance where a follower's client may still be
	// reconnecting after a backend restart.
	handoverBound time.Duration
	// faultWake, if set, excuses from timing the handovers and failovers
	// of the lane that injects the backend's faults (lane 1) too, when
	// they overlap such a fault or the faultWake after it: Consul's
	// servers re-apply lock-delays when they restart (consulFaultWake).
	faultWake time.Duration
	// args are the backend flags of `demo node` for a node whose proxies
	// listen on addrs (in the order of its targets).
	args func(addrs []string) []string
	// restart is the backend-restart fault; restartKind says what it does.
	restart     func(ctx context.Context) error
	restartKind string
	// faults are the backend's own faults (a clustered backend's), in
	// the scenario beside the common ones.
	faults []backendFault
	close  func()

	// mu guards windows: the spans of the backend faults injected so far
	// (To zero while one lasts), from which the lanes that did not
	// inject them are excused (history.Input.Excused).
	mu      sync.Mutex
	windows []history.Interval
}

// window records the start of a backend fault; the func it returns
// records its end.
func (be *backend) window() func() {
	be.mu.Lock()
	i := len(be.windows)
	be.windows = append(be.windows, history.Interval{Instance: be.name, From: time.Now()})
	be.mu.Unlock()
	return func() {
		be.mu.Lock()
		be.windows[i].To = time.Now()
		be.mu.Unlock()
	}
}

// excused returns the backend faults' spans, each lengthened by after
// (the clients' reconnection and the leases that expire in the wake of
// the fault); one still going lasts until now.
func (be *backend) excused(after time.Duration) []history.Interval {
	be.mu.Lock()
	defer be.mu.Unlock()
	out := make([]history.Interval, len(be.windows))
	for i, w := range be.windows {
		if w.To.IsZero() {
			w.To = time.Now()
		}
		w.To = w.To.Add(after)
		out[i] = w
	}
	return out
}

// backendFault is a fault of the backend's servers. run injects it,
// noting it (sc.note with kind) at the moment it takes effect, and returns
// once it has ended (healed, restarted).
type backendFault struct {
	kind string
	run  func(ctx context.Context, sc *scenario, kind string) error
}

// targetsOf returns the servers slot i's proxies forward to.
func (be *backend) targetsOf(i int) []string {
	if be.targets != nil {
		return be.targets(i)
	}
	return []string{be.target}
}

func newBackend(ctx context.Context, name, dir string) (*backend, error) {
	switch name {
	case "etcd":
		return newEtcd(dir)
	case "etcd-cluster":
		return newEtcdCluster(dir)
	case "postgres":
		return newSQL(ctx, dbtest.Postgres)
	case "postgres-ha":
		return newPostgresHA(ctx, dir)
	case "mysql", "mariadb":
		return newSQL(ctx, dbtest.MySQL)
	case "consul":
		return newConsul(ctx, dir)
	case "consul-cluster":
		return newConsulCluster(ctx, dir)
	case "redis":
		return newRedis(dir)
	case "kube":
		return newKube(ctx, dir)
	}
	return nil, fmt.Errorf("unknown backend %q (want etcd, etcd-cluster, postgres, postgres-ha, mysql, consul, consul-cluster, redis, kube)", name)
}

func newEtcd(dir string) (*backend, error) {
	srv, err := etcdtest.StartDir(filepath.Join(dir, "etcd"))
	if err != nil {
		return nil, err
	}
	ttl := 3 * time.Second
	return &backend{
		name: "etcd", topology: "one embedded etcd member (in the test process)", target: srv.Addr(), nodes: 4, ttl: ttl, grace: 30 * time.Second,
		crashBound: ttl + time.Second, handoverBound: time.Second + reconnectAllowance,
		args: func(addrs []string) []string {
			return []string{"--backend", "etcd", "--endpoints", "http://" + addrs[0]}
		},
		restart:     func(context.Context) error { return srv.Restart() },
		restartKind: "embedded etcd member stopped and started on the same data dir",
		close:       srv.Stop,
	}, nil
}

// newSQL is a backend on the shared test server of dialect d, with a table
// of its own. The nodes connect under a name of their own too (PostgreSQL:
// an application_name; MySQL: a user), so that the backend-restart fault
// kills exactly their connections.
func newSQL(ctx context.Context, d dbtest.Dialect) (*backend, error) {
	srv, err := dbtest.Open(ctx, d)
	if err != nil {
		return nil, err
	}
	name := dbtest.NewName("baton_e2e_")
	table := name // and the application name or user
	ttl, poll := 3*time.Second, 250*time.Millisecond
	be := &backend{
		name: string(d), topology: "the machine's " + string(d) + " server, a table and a connection name of the run's own", target: srv.Addr, nodes: 4, ttl: ttl, poll: poll,
		grace: 30 * time.Second, crashBound: ttl + poll + sqlReaction, handoverBound: time.Second + poll + reconnectAllowance,
	}
	var dropUser func(context.Context)
	switch d {
	case dbtest.Postgres:
		err = postgresNodes(be, srv, table, name)
	case dbtest.MySQL:
		dropUser, err = mysqlNodes(ctx, be, srv, table, name)
	}
	if err != nil {
		srv.Close()
		return nil, err
	}
	be.close = func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.DropTables(cctx, table)
		if dropUser != nil {
			dropUser(cctx)
		}
		srv.Close()
	}
	return be, nil
}

// postgresNodes sets the node flags and the restart fault of a PostgreSQL
// backend whose nodes connect with application_name app.
func postgresNodes(be *backend, srv *dbtest.Server, table, app string) error {
	u, err := url.Parse(srv.DSN)
	if err != nil {
		return err
	}
	be.args = func(addrs []string) []string {
		v := *u
		v.Host = addrs[0]
		q := v.Query()
		q.Set("application_name", app)
		v.RawQuery = q.Encode()
		return []string{"--backend", "postgres", "--dsn", v.String(), "--table", table}
	}
	be.restart = func(ctx context.Context) error {
		_, err := srv.Admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
		return err
	}
	be.restartKind = "pg_terminate_backend of every connection of the nodes (application_name " + app + ")"
	return nil
}

// mysqlNodes creates the user the nodes connect as and sets their flags
// and the restart fault. It returns the drop of the user.
func mysqlNodes(ctx context.Context, be *backend, srv *dbtest.Server, table, user string) (dropUser func(context.Context), err error) {
	admin := srv.Admin
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%'", user),
		fmt.Sprintf("CREATE USER '%s'@'localhost'", user),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'%%'", srv.DBName, user),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'localhost'", srv.DBName, user),
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("mysql: %s: %w", q, err)
		}
	}
	be.args = func(addrs []string) []string {
		c := mysql.NewConfig()
		c.User, c.Net, c.Addr, c.DBName, c.ParseTime = user, "tcp", addrs[0], srv.DBName, true
		return []string{"--backend", "mysql", "--dsn", c.FormatDSN(), "--table", table}
	}
	be.restart = func(ctx context.Context) error {
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
	}
	be.restartKind = "KILL CONNECTION of every connection of the nodes (user " + user + ")"
	return func(ctx context.Context) {
		_, _ = admin.ExecContext(ctx, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user))
		_, _ = admin.ExecContext(ctx, fmt.Sprintf("DROP USER IF EXISTS '%s'@'localhost'", user))
	}, nil
}

// newConsul is a single Consul server with its data in dir/consul: not a
// dev agent, so that a restart keeps the raft state and the lock's
// ModifyIndex (the fencing token) keeps rising.
func newConsul(ctx context.Context, dir string) (*backend, error) {
	bin, err := consultest.Binary()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envtest.ErrUnavailable, err)
	}
	srv, err := consultest.Start(ctx, consultest.Options{Binary: bin, DataDir: filepath.Join(dir, "consul"), NodeName: "baton-e2e"})
	if err != nil {
		return nil, err
	}
	ttl := 10 * time.Second
	return &backend{
		name: "consul", topology: "one Consul server agent (its raft data on disk), the nodes talking to it directly", target: srv.HTTPAddr, nodes: 3, ttl: ttl, grace: 60 * time.Second,
		// Consul reaps a session at 2*TTL, then keeps the key for the
		// lock-delay: the TTL (the default), so that a deregistered node's
		// session cannot free it while its leader still leads.
		crashBound: 2*ttl + ttl + consulReaction, handoverBound: 2 * time.Second, faultWake: ttl + consulFaultWake,
		args: func(addrs []string) []string {
			return []string{"--backend", "consul", "--consul-addr", addrs[0]}
		},
		restart:     srv.Restart,
		restartKind: "Consul server agent (non-dev, data dir kept) stopped with SIGTERM and started again",
		close:       func() { srv.Close() },
	}, nil
}

// newRedis is a redis-server of its own with its data in dir/redis,
// persisted to an append-only file synced on every write, as
// docs/backends/redis.md asks of a Redis that holds leases: the restart fault (SIGTERM, then the
// same port and data dir) keeps the token counter and the ledger.
func newRedis(dir string) (*backend, error) {
	data := filepath.Join(dir, "redis")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	srv, err := redistest.StartServer(data, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	if err != nil {
		return nil, err
	}
	ttl := 3 * time.Second
	return &backend{
		name: "redis", topology: "one redis-server (append-only file, fsync always)", target: srv.Addr(), nodes: 4, ttl: ttl, grace: 30 * time.Second,
		crashBound: ttl + time.Second, handoverBound: time.Second + reconnectAllowance,
		args: func(addrs []string) []string {
			return []string{"--backend", "redis", "--redis-addr", addrs[0]}
		},
		restart:     func(context.Context) error { return srv.Restart() },
		restartKind: "redis-server (append-only file, fsync always) stopped with SIGTERM and started on the same port and data dir",
		close:       srv.Stop,
	}, nil
}

// reconnectAllowance is added to the etcd and SQL handover bounds: a
// graceful stop soon after a backend restart finds followers whose
// campaign failed during the restart and whose client is still
// reconnecting (gRPC's backoff, the pool's dial) or waiting out the
// Elector's RetryPeriod; a cold CI run saw 1.38 s on etcd there against
// the 1 s bound. The bound stays far below a crash failover.
const reconnectAllowance = time.Second

// consulReaction is what a Consul crash failover may take beyond
// 2*TTL + LockDelay when measured from the kill: that bound counts from the
// dead leader's last renewal, and a kill just after one leaves the whole
// of it, plus the moment a follower takes to see the key free, wait out the
// lock-delay from then and lock (docs/guarantees.md, guarantee 7; this
// tolerance: docs/testing.md). Soaks measured up to 29.99 s from the kill
// against the 30 s.
const consulReaction = time.Second

// consulFaultWake, beyond the lock-delay (the TTL), is how long after a
// fault of its servers a Consul lane's handovers and failovers are not
// timed. A Consul server that restarts re-applies, as it replays its raft
// log, the lock-delay of every session invalidation in the log, counted
// from the replay, even to a key released gracefully since: when it then
// leads, it refuses the key for up to the lock-delay (a soak measured
// graceful handovers of 5 and 6.7 s after rolling restarts; the servers
// logged "Rejecting lock of key due to lock-delay" with an expiry 0.5 to
// 1.3 s after their start plus the 10 s). A new raft leader also restarts
// every session's TTL timer, which lengthens a crash failover as much. Both
// are Consul's: docs/guarantees.md, Consul operator overrides. The
// handovers and failovers are still judged for safety.
const consulFaultWake = 2 * time.Second

// sqlReaction is what an SQL crash failover may take beyond TTL +
// PollInterval when measured from the kill: the row's expiry is the
// database's time of the dead leader's last renewal plus the TTL, and a
// renewal sent just before the kill is dated when the database runs it;
// the follower that wakes at the expiry then reads the row and writes it
// (MySQL: three statements). On a loaded machine a soak measured 3.412 s
// from the kill against the 3.25 s of TTL + PollInterval
// (docs/guarantees.md, guarantee 7; this tolerance: docs/testing.md).
const sqlReaction = 500 * time.Millisecond
