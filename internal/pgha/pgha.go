// Package pgha runs a PostgreSQL primary and a streaming standby of a
// test's own, and fails over between them as often as a test asks: kill
// the primary, promote the standby, rebuild the dead server as the new
// standby, and again.
//
// The servers are the installed PostgreSQL's programs (the newest of
// /usr/lib/postgresql/*/bin), run as the postgres user (through runuser
// when the test runs as root: the server refuses to run as root), each on
// a free loopback port and a data directory under the directory the caller
// gives. They never touch a shared server (such as the one on 5432). They
// listen on 127.0.0.1 only, with no Unix socket, trust authentication, and
// fsync off: a crash of the machine loses them, a crash of a server does
// not.
//
// When the server programs are missing, Start returns an error wrapping
// testenv.ErrUnavailable; StartT skips the test loudly then (a failure
// under BATON_TEST_REQUIRE=1).
//
// A Pair's methods that change it (KillPrimary, Promote, Rebuild,
// Failover, Close) are meant to be called from one goroutine; the
// accessors (Primary, Standby, Servers, Server.Role) are safe to call
// from any goroutine at any time.
package pgha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/internal/testenv"
)

// DefaultDatabase is the database Start creates when Options.Database is
// empty.
const DefaultDatabase = "test"

// WaitLimit bounds each wait of this package (a server to stream, to
// accept writes, to catch up) when ctx allows longer; pg_ctl's own waits
// are bounded by the same time.
const WaitLimit = 60 * time.Second

// pollEvery is the period of the waits' checks.
const pollEvery = 20 * time.Millisecond

// Options tune Start. The zero value is an asynchronous pair with a
// database "test".
type Options struct {
	// Sync makes replication synchronous: synchronous_standby_names =
	// '*' and synchronous_commit = remote_apply are in both servers'
	// configuration, so that it holds whichever is primary. A commit is
	// then acknowledged only once the standby has applied it, and waits
	// (without end) while no standby is streaming: after a promotion,
	// until Rebuild has brought the other server back.
	Sync bool
	// Database is created on the first primary before the standby is
	// copied from it, so that it exists on both servers. Default
	// DefaultDatabase.
	Database string
}

// Role is what a server of a Pair is.
type Role int

// The roles.
const (
	// RolePrimary: the server that accepts writes (when running; after
	// KillPrimary, until Promote, the primary is a stopped one).
	RolePrimary Role = iota + 1
	// RoleStandby: a server in recovery that streams from the primary.
	RoleStandby
	// RoleDemoted: the former primary after its standby was promoted. It
	// may hold writes the new primary lacks and has the old timeline: it
	// rejoins only through Rebuild.
	RoleDemoted
)

// String returns "primary", "standby" or "demoted".
func (r Role) String() string {
	switch r {
	case RolePrimary:
		return "primary"
	case RoleStandby:
		return "standby"
	case RoleDemoted:
		return "demoted"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// StopMode is pg_ctl stop's shutdown mode.
type StopMode string

// The shutdown modes.
const (
	// Immediate is a crash: no shutdown checkpoint, nothing more sent to
	// a standby, clients cut off.
	Immediate StopMode = "immediate"
	// Fast is a clean stop: clients cut off, a shutdown checkpoint.
	Fast StopMode = "fast"
)

// Server is one PostgreSQL server of a Pair. Its port and directories do
// not change, not across role swaps either.
type Server struct {
	// Name is "pg0" or "pg1", after the server's index in Pair.Servers;
	// it is also the application_name it streams under (the name
	// pg_stat_replication shows on the primary).
	Name string
	// Port is the loopback TCP port the server listens on.
	Port int
	// Dir is the data directory.
	Dir string
	// Log is the server's log file. It is outside Dir, so that it
	// survives Rebuild; each start appends to it.
	Log string

	root string // the parent of Dir and Log, owned by the postgres user
	pair *Pair
	role Role // guarded by pair.mu
}

// Addr returns "127.0.0.1:port", where a proxy in front of the server
// forwards to.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// DSN returns the data source name of database on the server, as the
// postgres superuser (trust authentication):
// postgres://postgres@127.0.0.1:port/database?sslmode=disable (the
// database name escaped as a URL path).
func (s *Server) DSN(database string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: s.Addr(), Path: "/" + database, RawQuery: "sslmode=disable"}
	return u.String()
}

// Role returns what the server is now.
func (s *Server) Role() Role {
	s.pair.mu.Lock()
	defer s.pair.mu.Unlock()
	return s.role
}

// String returns the server's name, port and role, for logs.
func (s *Server) String() string {
	return fmt.Sprintf("%s (port %d, %s)", s.Name, s.Port, s.Role())
}

// Start starts the server (pg_ctl start -w) and returns once it accepts
// connections. It does not change the role: starting a standby that was
// stopped makes it stream again; starting a demoted server makes two
// primaries (use Rebuild to bring it back as a standby).
func (s *Server) Start(ctx context.Context) error {
	var from int64
	if fi, err := os.Stat(s.Log); err == nil {
		from = fi.Size()
	}
	if err := s.pair.run(ctx, "pg_ctl", "-D", s.Dir, "-l", s.Log, "-w", "-t", waitSeconds, "start"); err != nil {
		return fmt.Errorf("pgha: start %s: %w%s", s.Name, err, logTail(s.Log, from))
	}
	return nil
}

// Stop stops the server (pg_ctl stop -w) in mode. It does not change the
// role (KillPrimary and Promote do).
func (s *Server) Stop(ctx context.Context, mode StopMode) error {
	if err := s.pair.run(ctx, "pg_ctl", "-D", s.Dir, "-m", string(mode), "-w", "-t", waitSeconds, "stop"); err != nil {
		return fmt.Errorf("pgha: stop %s: %w", s.Name, err)
	}
	return nil
}

// Running reports whether the server's postmaster is running (pg_ctl
// status).
func (s *Server) Running(ctx context.Context) (bool, error) {
	err := s.pair.run(ctx, "pg_ctl", "-D", s.Dir, "status")
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee) && (ee.ExitCode() == 3 || ee.ExitCode() == 4): // not running; no data directory
		return false, nil
	}
	return false, fmt.Errorf("pgha: status of %s: %w", s.Name, err)
}

// Pair is a primary and a standby, as Start made them and failovers have
// swapped them.
type Pair struct {
	bin  string // the PostgreSQL programs' directory
	opts Options
	// uid and gid of the postgres user, when running as root (-1 else).
	uid, gid int

	mu      sync.Mutex
	servers [2]*Server
	closed  bool
}

// FailoverTimes is how long the steps of a Failover took.
type FailoverTimes struct {
	// Away is the time from the primary's kill to the promoted standby
	// answering as a primary (pg_is_in_recovery() false): how long no
	// server took writes.
	Away time.Duration
	// Rebuild is the time Rebuild took, until the rebuilt standby
	// streamed with the expected sync_state. With Options.Sync, commits
	// on the new primary wait during it.
	Rebuild time.Duration
}

// Start runs a primary and a streaming standby under dir (made if
// missing): subdirectories pg0 and pg1, owned by the postgres user, each
// holding a data directory and a log. The primary (pg0) is made with
// initdb (trust authentication, UTF8, locale C), gets the database
// opts.Database, and the standby (pg1) is a pg_basebackup of it (-R -X
// stream). Start returns once the standby streams with sync_state 'sync'
// (opts.Sync) or 'async'. Ports found free may be taken before a server
// binds them: Start then tries other ones.
//
// When running as root, Start gives others search permission (o+x) on dir
// and those of its parents that lack it, so that the postgres user can
// reach the subdirectories (t.TempDir's parent is 0700); it lists
// nothing.
//
// A missing PostgreSQL installation (or postgres user, or runuser) gives
// an error wrapping testenv.ErrUnavailable. On any error, what Start
// started is stopped and removed. The caller calls Close.
func Start(ctx context.Context, dir string, opts Options) (_ *Pair, err error) {
	if opts.Database == "" {
		opts.Database = DefaultDatabase
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	p := &Pair{bin: bin, opts: opts, uid: -1, gid: -1}
	if os.Geteuid() == 0 {
		if err := p.lookupPostgres(); err != nil {
			return nil, err
		}
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pgha: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgha: %w", err)
	}
	if p.uid >= 0 {
		if err := searchable(dir); err != nil {
			return nil, err
		}
	}
	ports, err := testenv.FreePorts(2)
	if err != nil {
		return nil, fmt.Errorf("pgha: %w", err)
	}
	for i := range p.servers {
		name := "pg" + strconv.Itoa(i)
		root := filepath.Join(dir, name)
		if err := os.Mkdir(root, 0o700); err != nil {
			p.removeRoots()
			return nil, fmt.Errorf("pgha: %w", err)
		}
		p.servers[i] = &Server{Name: name, Port: ports[i], Dir: filepath.Join(root, "data"),
			Log: filepath.Join(root, "server.log"), root: root, pair: p}
		if err := p.chown(root); err != nil {
			p.removeRoots()
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			_ = p.Close()
		}
	}()

	pri, sb := p.servers[0], p.servers[1]
	if err := p.run(ctx, "initdb", "-D", pri.Dir, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("pgha: initdb %s: %w", pri.Name, err)
	}
	if err := p.startFresh(ctx, pri, nil); err != nil {
		return nil, err
	}
	p.setRole(pri, RolePrimary)
	if err := p.createDatabase(ctx, pri); err != nil {
		return nil, err
	}
	if err := p.baseBackup(ctx, pri, sb); err != nil {
		return nil, err
	}
	if err := p.startFresh(ctx, sb, pri); err != nil {
		return nil, err
	}
	p.setRole(sb, RoleStandby)
	if err := p.WaitStreaming(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// StartT is Start for a test, under t.TempDir(): missing PostgreSQL
// programs skip t loudly (fail it under BATON_TEST_REQUIRE=1), any other
// error fails it, and the pair is closed when t ends.
func StartT(t testing.TB, opts Options) *Pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*WaitLimit)
	defer cancel()
	p, err := Start(ctx, t.TempDir(), opts)
	if errors.Is(err, testenv.ErrUnavailable) {
		testenv.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pgha: close: %v", err)
		}
	})
	return p
}

// Options returns the options the pair was started with (Database filled
// in).
func (p *Pair) Options() Options { return p.opts }

// Servers returns both servers in a fixed order: index 0 is pg0 (the
// first primary), index 1 pg1, whatever their roles are now.
func (p *Pair) Servers() [2]*Server { return p.servers }

// Primary returns the server in the primary role: after KillPrimary it is
// the stopped one, until Promote makes the standby the primary. It is nil
// only after Close.
func (p *Pair) Primary() *Server { return p.withRole(RolePrimary) }

// Standby returns the server in the standby role, or nil between Promote
// and the end of Rebuild (and after Close).
func (p *Pair) Standby() *Server { return p.withRole(RoleStandby) }

func (p *Pair) withRole(r Role) *Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.servers {
		if s != nil && s.role == r && !p.closed {
			return s
		}
	}
	return nil
}

func (p *Pair) setRole(s *Server, r Role) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.role = r
}

// KillPrimary crashes the primary (pg_ctl stop -m immediate). It stays
// the primary (stopped) until Promote.
func (p *Pair) KillPrimary(ctx context.Context) error {
	pri := p.Primary()
	if pri == nil {
		return errors.New("pgha: kill: no primary")
	}
	return pri.Stop(ctx, Immediate)
}

// Promote makes the standby the primary (pg_ctl promote -w) and returns
// once it answers as one (pg_is_in_recovery() false). The old primary
// must be stopped (KillPrimary, or Stop): Promote refuses to make two
// primaries. The old primary becomes RoleDemoted. With Options.Sync,
// commits on the new primary wait until Rebuild has given it a standby.
func (p *Pair) Promote(ctx context.Context) error {
	sb := p.Standby()
	if sb == nil {
		return errors.New("pgha: promote: no standby")
	}
	old := p.Primary()
	if old != nil {
		running, err := old.Running(ctx)
		if err != nil {
			return fmt.Errorf("pgha: promote: %w", err)
		}
		if running {
			return fmt.Errorf("pgha: promote: the primary %s is running (KillPrimary first)", old.Name)
		}
	}
	if err := p.run(ctx, "pg_ctl", "-D", sb.Dir, "-w", "-t", waitSeconds, "promote"); err != nil {
		return fmt.Errorf("pgha: promote %s: %w", sb.Name, err)
	}
	err := p.waitFor(ctx, sb, "pg_is_in_recovery() to be false", func(ctx context.Context, c *pgx.Conn) (bool, error) {
		var rec bool
		err := c.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec)
		return err == nil && !rec, err
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	sb.role = RolePrimary
	if old != nil {
		old.role = RoleDemoted
	}
	p.mu.Unlock()
	return nil
}

// Rebuild makes the demoted server a standby of the primary: it stops it
// if it runs, removes its data directory, copies the primary with
// pg_basebackup -R -X stream (a fast checkpoint), gives it back its own
// port and settings, starts it, and returns once it streams with the
// expected sync_state. The pair is then a primary and a standby again,
// with the roles swapped, ready for the next KillPrimary.
//
// It takes 1-3 s on an idle 2-core machine (most of it the copy of the
// ~40 MB cluster and the server's start), a few seconds more on a loaded
// one; with Options.Sync, commits on the primary wait all that time. On
// an error the server stays demoted, and Rebuild can be called again.
func (p *Pair) Rebuild(ctx context.Context) error {
	pri := p.Primary()
	old := p.withRole(RoleDemoted)
	if pri == nil || old == nil {
		return errors.New("pgha: rebuild: no demoted server (Promote first)")
	}
	running, err := old.Running(ctx)
	if err != nil {
		return fmt.Errorf("pgha: rebuild: %w", err)
	}
	if running {
		if err := old.Stop(ctx, Immediate); err != nil {
			return fmt.Errorf("pgha: rebuild: %w", err)
		}
	}
	if err := os.RemoveAll(old.Dir); err != nil {
		return fmt.Errorf("pgha: rebuild: %w", err)
	}
	if err := p.baseBackup(ctx, pri, old); err != nil {
		return err
	}
	if err := old.writeConf(pri); err != nil {
		return err
	}
	if err := old.Start(ctx); err != nil {
		return fmt.Errorf("pgha: rebuild: %w (port %d taken meanwhile?)", err, old.Port)
	}
	if err := p.waitStreaming(ctx, pri, old); err != nil {
		return err
	}
	p.setRole(old, RoleStandby)
	return nil
}

// Failover is KillPrimary, Promote and Rebuild: the roles swap, and the
// pair is back to a streaming primary and standby.
func (p *Pair) Failover(ctx context.Context) (FailoverTimes, error) {
	var ft FailoverTimes
	start := time.Now()
	if err := p.KillPrimary(ctx); err != nil {
		return ft, err
	}
	if err := p.Promote(ctx); err != nil {
		return ft, err
	}
	ft.Away = time.Since(start)
	start = time.Now()
	err := p.Rebuild(ctx)
	ft.Rebuild = time.Since(start)
	return ft, err
}

// WaitStreaming waits until the standby streams from the primary with
// sync_state 'sync' (Options.Sync) or 'async' (pg_stat_replication).
func (p *Pair) WaitStreaming(ctx context.Context) error {
	pri, sb := p.Primary(), p.Standby()
	if pri == nil || sb == nil {
		return errors.New("pgha: wait for streaming: no primary and standby")
	}
	return p.waitStreaming(ctx, pri, sb)
}

func (p *Pair) waitStreaming(ctx context.Context, pri, sb *Server) error {
	want := "async"
	if p.opts.Sync {
		want = "sync"
	}
	return p.waitFor(ctx, pri, sb.Name+" to stream with sync_state "+want, func(ctx context.Context, c *pgx.Conn) (bool, error) {
		var state string
		err := c.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'`,
			sb.Name).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil && state == want, err
	})
}

// CaughtUp waits until the standby has replayed everything the primary
// had written when CaughtUp was called (pg_current_wal_lsn).
func (p *Pair) CaughtUp(ctx context.Context) error {
	pri, sb := p.Primary(), p.Standby()
	if pri == nil || sb == nil {
		return errors.New("pgha: caught up: no primary and standby")
	}
	var lsn string
	if err := p.queryRow(ctx, pri, `SELECT pg_current_wal_lsn()::text`, &lsn); err != nil {
		return fmt.Errorf("pgha: caught up: %s: %w", pri.Name, err)
	}
	return p.waitFor(ctx, sb, "replay of "+lsn, func(ctx context.Context, c *pgx.Conn) (bool, error) {
		var ok bool
		err := c.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, lsn).Scan(&ok)
		return err == nil && ok, err
	})
}

// Close stops both servers (immediate) and removes their directories
// (pg0 and pg1 under Start's dir). Calling it again does nothing.
func (p *Pair) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	var errs []error
	for _, s := range p.servers {
		if s == nil {
			continue
		}
		if running, err := s.Running(ctx); err != nil || running {
			if err := s.Stop(ctx, Immediate); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := p.removeRoots(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (p *Pair) removeRoots() error {
	var errs []error
	for _, s := range p.servers {
		if s != nil {
			if err := os.RemoveAll(s.root); err != nil {
				errs = append(errs, fmt.Errorf("pgha: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// startFresh writes s's configuration (a standby of upstream, or a
// primary when upstream is nil) and starts it, on other ports when its
// own was taken meanwhile.
func (p *Pair) startFresh(ctx context.Context, s, upstream *Server) error {
	for attempt := 1; ; attempt++ {
		if err := s.writeConf(upstream); err != nil {
			return err
		}
		var from int64
		if fi, err := os.Stat(s.Log); err == nil {
			from = fi.Size()
		}
		err := s.Start(ctx)
		if err == nil {
			return nil
		}
		tail := logTail(s.Log, from)
		if attempt == 3 || !strings.Contains(tail, "could not bind") && !strings.Contains(tail, "already in use") {
			return err
		}
		ports, perr := testenv.FreePorts(1)
		if perr != nil {
			return fmt.Errorf("pgha: %w", perr)
		}
		s.Port = ports[0]
	}
}

// writeConf replaces s's postgresql.auto.conf (which initdb and
// pg_basebackup write, the latter with the primary's settings) with its
// own settings: the same for both servers but for the port and the
// upstream a standby streams from.
func (s *Server) writeConf(upstream *Server) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by pgha for %s; ALTER SYSTEM may add to it.\n", s.Name)
	fmt.Fprintf(&b, "listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = ''\n", s.Port)
	b.WriteString("wal_level = replica\nmax_wal_senders = 4\nwal_keep_size = '64MB'\nfsync = off\n")
	if s.pair.opts.Sync {
		b.WriteString("synchronous_standby_names = '*'\nsynchronous_commit = remote_apply\n")
	}
	if upstream != nil {
		fmt.Fprintf(&b, "primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'\n", upstream.Port, s.Name)
	}
	f := filepath.Join(s.Dir, "postgresql.auto.conf")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("pgha: %w", err)
	}
	return s.pair.chown(f)
}

// createDatabase creates opts.Database on pri. The session does not wait
// for a synchronous standby: there is none yet.
func (p *Pair) createDatabase(ctx context.Context, pri *Server) error {
	ctx, cancel := context.WithTimeout(ctx, WaitLimit)
	defer cancel()
	c, err := pgx.Connect(ctx, pri.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgha: %s: %w", pri.Name, err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, `SET synchronous_commit = local`); err != nil {
		return fmt.Errorf("pgha: %s: %w", pri.Name, err)
	}
	var version int
	if err := c.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return fmt.Errorf("pgha: %s: %w", pri.Name, err)
	}
	q := `CREATE DATABASE ` + pgx.Identifier{p.opts.Database}.Sanitize()
	if version >= 150000 {
		// The default since 15, WAL_LOG, writes the template into the
		// WAL, which the base backup then streams too: slower.
		q += ` STRATEGY = FILE_COPY`
	}
	if _, err := c.Exec(ctx, q); err != nil {
		return fmt.Errorf("pgha: %s: create database %q: %w", pri.Name, p.opts.Database, err)
	}
	return nil
}

// baseBackup copies from into to.Dir, which must not exist or be empty,
// as a standby (-R: standby.signal).
func (p *Pair) baseBackup(ctx context.Context, from, to *Server) error {
	if err := p.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(from.Port), "-U", "postgres",
		"-D", to.Dir, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"); err != nil {
		return fmt.Errorf("pgha: base backup of %s for %s: %w", from.Name, to.Name, err)
	}
	return nil
}

// waitFor polls cond on a connection to s's database postgres (made
// again after an error) every 20 ms until it returns true, ctx ends or
// WaitLimit passes.
func (p *Pair) waitFor(ctx context.Context, s *Server, what string, cond func(context.Context, *pgx.Conn) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, WaitLimit)
	defer cancel()
	var c *pgx.Conn
	defer func() {
		if c != nil {
			c.Close(context.Background())
		}
	}()
	var last error
	for {
		if c == nil {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			c, last = pgx.Connect(cctx, s.DSN("postgres"))
			ccancel()
		}
		if last == nil {
			qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
			ok, err := cond(qctx, c)
			qcancel()
			if ok {
				return nil
			}
			if last = err; err != nil {
				c.Close(context.Background())
				c = nil
			}
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("pgha: %s: waiting for %s: %v", s.Name, what, ctx.Err())
			if last != nil {
				msg += " (last error: " + last.Error() + ")"
			}
			return errors.New(msg)
		case <-time.After(pollEvery):
		}
	}
}

// queryRow runs q on a connection of its own to s's database postgres.
func (p *Pair) queryRow(ctx context.Context, s *Server, q string, dest ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.QueryRow(ctx, q).Scan(dest...)
}

// waitSeconds is WaitLimit for pg_ctl -t.
var waitSeconds = strconv.Itoa(int(WaitLimit / time.Second))

// run runs one of the PostgreSQL programs as the postgres user (through
// runuser when running as root), in /, so that a working directory the
// postgres user cannot read does not matter.
func (p *Pair) run(ctx context.Context, prog string, args ...string) error {
	name := filepath.Join(p.bin, prog)
	var cmd *exec.Cmd
	if p.uid >= 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	cmd.Dir = "/"
	cmd.WaitDelay = 5 * time.Second // runuser killed by ctx may leave its child holding the output
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", prog, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// installDirs is where binDir looks (a variable for a test of the
// missing installation).
var installDirs = "/usr/lib/postgresql/*/bin"

// binDir returns the newest installed PostgreSQL's program directory that
// has the server programs, or an error wrapping testenv.ErrUnavailable.
func binDir() (string, error) {
	dirs, _ := filepath.Glob(installDirs)
	version := func(d string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		ok := true
		for _, prog := range []string{"initdb", "pg_ctl", "pg_basebackup", "postgres"} {
			if _, err := os.Stat(filepath.Join(d, prog)); err != nil {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: PostgreSQL server programs (initdb, pg_ctl, pg_basebackup, postgres) not found in %s",
		testenv.ErrUnavailable, installDirs)
}

// lookupPostgres finds the postgres user and runuser, which running as
// root needs.
func (p *Pair) lookupPostgres() error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("%w: running as root needs the postgres user: %w", testenv.ErrUnavailable, err)
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		return fmt.Errorf("%w: running as root needs runuser: %w", testenv.ErrUnavailable, err)
	}
	p.uid, _ = strconv.Atoi(u.Uid)
	p.gid, _ = strconv.Atoi(u.Gid)
	return nil
}

// chown gives path to the postgres user when running as root.
func (p *Pair) chown(path string) error {
	if p.uid < 0 {
		return nil
	}
	if err := os.Chown(path, p.uid, p.gid); err != nil {
		return fmt.Errorf("pgha: %w", err)
	}
	return nil
}

// searchable adds search permission for others to dir and each of its
// parents that lacks it.
func searchable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgha: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("pgha: make %s reachable for the postgres user: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// logTail returns the last lines of the log written after offset from,
// for an error message ("" if none).
func logTail(path string, from int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) <= from {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b[from:])), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "\n" + filepath.Base(path) + ":\n" + strings.Join(lines, "\n")
}
