// Package etcdtest runs a single-member etcd server in the calling process,
// on loopback ports, for tests and for the demo cluster.
//
// Start is for tests: it uses a temporary data directory and stops the
// server when the test ends. StartDir is the same without a testing.TB, for
// programs such as `demo cluster`; the caller stops the server with Stop.
package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// ReadyTimeout bounds how long StartDir and Restart wait for the server to
// elect itself and serve.
const ReadyTimeout = 60 * time.Second

// Server is an embedded single-member etcd server listening on loopback.
// Its methods are safe for concurrent use.
type Server struct {
	dir    string
	client url.URL
	peer   url.URL

	mu   sync.Mutex
	etcd *embed.Etcd // nil while stopped
}

// Start starts a server in a temporary directory of t and registers its
// Stop with t.Cleanup. It fails t if the server does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartDir(t.TempDir())
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartDir starts a server keeping its data in dir (created if missing; an
// existing member's data is reused), listening for clients and peers on
// free loopback ports. It blocks until the server serves or ReadyTimeout
// passes. Logs are discarded unless BATON_ETCD_LOG=1. The caller must call
// Stop.
func StartDir(dir string) (*Server, error) {
	var lastErr error
	for range 3 { // a picked port can be taken by someone else before we bind it
		cport, err := freePort()
		if err != nil {
			return nil, err
		}
		pport, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{
			dir:    dir,
			client: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cport)},
			peer:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pport)},
		}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// Endpoint is the client URL, e.g. "http://127.0.0.1:23791".
func (s *Server) Endpoint() string { return s.client.String() }

// Addr is the client address as host:port, for a TCP proxy.
func (s *Server) Addr() string { return s.client.Host }

// Dir is the data directory.
func (s *Server) Dir() string { return s.dir }

// Stop stops the server and waits for it to shut down. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd != nil {
		s.etcd.Close()
		s.etcd = nil
	}
}

// Restart stops the server (if running) and starts it again on the same
// data directory and ports, so clients reconnect to the same endpoint.
// Leases survive a restart (etcd extends them by their TTL on start).
func (s *Server) Restart() error {
	s.Stop()
	var err error
	for range 50 { // the old listeners may take a moment to be released
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd != nil {
		return errors.New("etcdtest: already running")
	}
	cfg := embed.NewConfig()
	cfg.Name = "baton-test"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.client}
	cfg.AdvertiseClientUrls = []url.URL{s.client}
	cfg.ListenPeerUrls = []url.URL{s.peer}
	cfg.AdvertisePeerUrls = []url.URL{s.peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true // tests and demos: speed over durability across OS crashes
	if os.Getenv("BATON_ETCD_LOG") == "1" {
		cfg.LogLevel = "info"
		cfg.LogOutputs = []string{"stderr"}
	} else {
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcdtest: start in %s: %w", s.dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdtest: start in %s: %w", s.dir, err)
	case <-time.After(ReadyTimeout):
		e.Close()
		return fmt.Errorf("etcdtest: start in %s: not ready after %v", s.dir, ReadyTimeout)
	}
	s.etcd = e
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("etcdtest: pick a port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
