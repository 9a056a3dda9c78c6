// Package mariadbtest runs a throwaway MariaDB server for tests: its own
// data directory, initialised by mariadb-install-db in a temporary
// directory, on a free loopback port, with TLS when asked, killed and
// removed when the test ends. It never touches a shared server (such as
// the one on 3306), so a test can change server-wide settings such as TLS.
//
// The binaries (mariadbd and mariadb-install-db) are found in PATH or in
// /usr/sbin; when they are missing, Start skips the test through
// internal/envtest (a failure under BATON_TEST_REQUIRE=1).
package mariadbtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/batonhq/baton/internal/certtest"
	"github.com/batonhq/baton/internal/envtest"
)

// ReadyTimeout bounds how long a start waits for the data directory to be
// initialised and for the server to answer, each. Both are a second or
// two on an idle machine; the margin is for a loaded one.
const ReadyTimeout = 60 * time.Second

// Database is the database every server has, empty at start.
const Database = "test"

// Options tune StartWith. The zero value is a plain server.
type Options struct {
	// TLS makes the server offer TLS with a certificate for 127.0.0.1
	// signed by a CA of its own (Server.CA); clients may still connect
	// without it.
	TLS bool
}

// Server is a running mariadbd.
type Server struct {
	// Addr is the server's host:port (127.0.0.1).
	Addr string
	// CA signed the server's certificate (nil without Options.TLS).
	CA *certtest.CA

	cmd  *exec.Cmd
	done chan struct{}
	out  *envtest.Buffer
}

// DSN returns a go-sql-driver/mysql data source name for root (no
// password) on Database, with parseTime and the given tls parameter ("":
// none).
func (s *Server) DSN(tlsParam string) string {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.DBName = "root", "tcp", s.Addr, Database
	c.ParseTime = true
	c.TLSConfig = tlsParam
	c.Timeout = 5 * time.Second
	return c.FormatDSN()
}

// Log returns what the server printed.
func (s *Server) Log() string { return s.out.String() }

// binary finds name in PATH or /usr/sbin (where Debian puts mariadbd, out
// of a normal user's PATH).
func binary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: %s not in PATH or /usr/sbin", envtest.ErrUnavailable, name)
	}
	return p, nil
}

// Start starts a plain server; see StartWith.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith starts a server in a temporary directory of t and registers
// its stop with t.Cleanup (the directory, data included, goes with t). It
// skips t when the binaries are missing and fails t if the server does not
// start.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	return envtest.Start(t, "mariadbtest", func(dir string) (*Server, error) { return StartServer(dir, opts) })
}

// serverArgs are the settings of both the bootstrap and the server: small
// InnoDB files, so that a start writes little.
var serverArgs = []string{
	"--no-defaults", "--innodb-log-file-size=8M", "--innodb-buffer-pool-size=16M",
	"--skip-name-resolve",
}

// StartServer initialises a data directory under dir and starts a server
// on it; the caller calls Stop and removes dir. Missing binaries give an
// error wrapping envtest.ErrUnavailable.
func StartServer(dir string, opts Options) (*Server, error) {
	mariadbd, err := binary("mariadbd")
	if err != nil {
		return nil, err
	}
	install, err := binary("mariadb-install-db")
	if err != nil {
		return nil, err
	}
	data, tmp := filepath.Join(dir, "data"), filepath.Join(dir, "tmp")
	// A temporary directory of its own: servers sharing /tmp have been seen
	// to clash on their temporary tables' names.
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, err
	}
	// --user=root: mariadbd refuses to run as root without it (CI runs as
	// root); as another user it is that user anyway.
	user := "--user=" + currentUser()
	args := append([]string{"--datadir=" + data, "--tmpdir=" + tmp, user, "--auth-root-authentication-method=normal", "--skip-test-db"}, serverArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	out, err := exec.CommandContext(ctx, install, args...).CombinedOutput()
	cancel()
	if err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %w: %s", err, out)
	}
	var tlsArgs []string
	var ca *certtest.CA
	if opts.TLS {
		ca, err = certtest.NewCA(dir, "mariadb")
		if err != nil {
			return nil, err
		}
		pair, err := ca.Server("mariadb-server")
		if err != nil {
			return nil, err
		}
		tlsArgs = []string{"--ssl-ca=" + ca.CertFile, "--ssl-cert=" + pair.CertFile, "--ssl-key=" + pair.KeyFile}
	}
	var last error
	for range 5 { // a port found free may be taken before the server binds it
		ports, err := envtest.FreePorts(1)
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), CA: ca}
		a := append(append([]string{}, serverArgs...), "--datadir="+data, "--tmpdir="+tmp, user,
			"--bind-address=127.0.0.1", "--port="+strconv.Itoa(ports[0]),
			"--socket="+filepath.Join(dir, "mariadbd.sock"), "--pid-file="+filepath.Join(dir, "mariadbd.pid"),
			"--skip-log-bin")
		a = append(a, tlsArgs...)
		if last = s.start(mariadbd, a); last == nil {
			return s, nil
		}
	}
	return nil, last
}

func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Geteuid())
}

func (s *Server) start(bin string, args []string) error {
	cmd := exec.Command(bin, args...)
	s.out = &envtest.Buffer{}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mariadbd: %w", err)
	}
	s.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.done) }()
	s.cmd = cmd
	if err := s.ready(); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// ready waits until root can connect and creates Database.
func (s *Server) ready() error {
	db, err := sql.Open("mysql", "root@tcp("+s.Addr+")/?timeout=1s")
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(ReadyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+Database)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("mariadbd on %s exited at start: %s", s.Addr, s.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd on %s did not answer within %v: %v: %s", s.Addr, ReadyTimeout, err, s.out.String())
		}
	}
}

// Stop kills the server (its data is thrown away with its directory) and
// waits for it to exit. It is idempotent; call it from one goroutine.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
