package pghatest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
		return fmt.Errorf("pghatest: start %s: %w%s", s.Name, err, logTail(s.Log, from))
	}
	return nil
}

// Stop stops the server (pg_ctl stop -w) in mode. It does not change the
// role (KillPrimary and Promote do).
func (s *Server) Stop(ctx context.Context, mode StopMode) error {
	if err := s.pair.run(ctx, "pg_ctl", "-D", s.Dir, "-m", string(mode), "-w", "-t", waitSeconds, "stop"); err != nil {
		return fmt.Errorf("pghatest: stop %s: %w", s.Name, err)
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
	return false, fmt.Errorf("pghatest: status of %s: %w", s.Name, err)
}

// writeConf replaces s's postgresql.auto.conf (which initdb and
// pg_basebackup write, the latter with the primary's settings) with its
// own settings: the same for both servers but for the port and the
// upstream a standby streams from.
func (s *Server) writeConf(upstream *Server) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by pghatest for %s; ALTER SYSTEM may add to it.\n", s.Name)
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
		return fmt.Errorf("pghatest: %w", err)
	}
	return s.pair.chown(f)
}
