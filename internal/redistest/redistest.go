// Package redistest runs a throwaway redis-server for tests: on a free
// loopback port, without persistence, stopped when the test ends. It
// never uses a shared instance (such as one on 6379).
//
// The binary is found in PATH; when it is missing, Start skips the test
// through internal/envtest (a failure under BATON_TEST_REQUIRE=1).
package redistest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/envtest"
)

// ReadyTimeout bounds how long Start waits for the server to answer PING.
const ReadyTimeout = 10 * time.Second

// Options tune StartWith. The zero value is a plain server.
type Options struct {
	// Args are extra redis-server arguments, e.g. "--requirepass", "pw".
	Args []string
	// ConfigFile, if set, is the configuration file, passed first.
	ConfigFile string
	// Sentinel runs a Sentinel (--sentinel; ConfigFile is required, and
	// must be writable: Sentinel rewrites it).
	Sentinel bool
	// TLS, if set, makes the server listen with TLS only (port 0 for
	// plain TCP): CertFile, KeyFile and CAFile are passed as
	// --tls-cert-file, --tls-key-file and --tls-ca-cert-file, and clients
	// need no certificate of their own (--tls-auth-clients no).
	TLS *TLSFiles
}

// TLSFiles are the server's PEM files.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// Server is a running redis-server. Its methods are safe for concurrent
// use.
type Server struct {
	addr string
	args []string
	tls  bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *lockedWriter
	done chan struct{}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Binary returns the path of redis-server, or an error wrapping
// envtest.ErrUnavailable.
func Binary() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w: redis-server not in PATH: %w", envtest.ErrUnavailable, err)
	}
	return p, nil
}

// SupportsTLS reports whether the redis-server in PATH was built with TLS.
func SupportsTLS() bool {
	bin, err := Binary()
	if err != nil {
		return false
	}
	// A build without TLS refuses the option; one with it complains about
	// the missing certificate files instead.
	out, _ := exec.Command(bin, "--port", "0", "--tls-port", "1", "--save", "", "--appendonly", "no",
		"--tls-cert-file", "/nonexistent", "--tls-key-file", "/nonexistent").CombinedOutput()
	return !strings.Contains(string(out), "Bad directive") && !strings.Contains(string(out), "not compiled")
}

// Start starts a plain server and registers its Stop with t.Cleanup. It
// skips t when redis-server is missing, and fails t if it does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with opts.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	return envtest.Start(t, "redistest", func(dir string) (*Server, error) { return StartServer(dir, opts) })
}

// StartServer starts a server working in dir; the caller must call Stop.
// A missing binary gives an error wrapping envtest.ErrUnavailable.
func StartServer(dir string, opts Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var last error
	for range 5 { // a port found free may be taken before the server binds it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		var args []string
		if opts.ConfigFile != "" {
			args = append(args, opts.ConfigFile)
		}
		if opts.Sentinel {
			args = append(args, "--sentinel", "--bind", "127.0.0.1", "--dir", dir)
		} else {
			args = append(args, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
		}
		if opts.TLS != nil {
			args = append(args, "--port", "0", "--tls-port", strconv.Itoa(port),
				"--tls-cert-file", opts.TLS.CertFile, "--tls-key-file", opts.TLS.KeyFile,
				"--tls-ca-cert-file", opts.TLS.CAFile, "--tls-auth-clients", "no")
		} else {
			args = append(args, "--port", strconv.Itoa(port))
		}
		args = append(args, opts.Args...)
		s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), args: append([]string{bin}, args...), tls: opts.TLS != nil}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	return nil, last
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.args[0], s.args[1:]...)
	out := &lockedWriter{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.out, s.done = cmd, out, done
	deadline := time.Now().Add(ReadyTimeout)
	for {
		if s.ping() {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server %s exited at start: %s", strings.Join(s.args[1:], " "), s.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redis-server on %s did not answer PING within %v: %s", s.addr, ReadyTimeout, s.out.String())
		}
	}
}

// ping reports whether the server answers PING (an authentication error
// counts: the server is up).
func (s *Server) ping() bool {
	c, err := net.DialTimeout("tcp", s.addr, time.Second)
	if err != nil {
		return false
	}
	if s.tls {
		c = tls.Client(c, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a readiness probe of a test server
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH"))
}

// Stop kills the server and waits for it to exit. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	envtest.Terminate(s.cmd.Process, s.done, 5*time.Second)
	s.cmd = nil
}

// Restart stops the server and starts it again on the same port (with no
// data: persistence is off).
func (s *Server) Restart() error {
	s.Stop()
	return s.start()
}

// Log returns what the server printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return ""
	}
	return s.out.String()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}
