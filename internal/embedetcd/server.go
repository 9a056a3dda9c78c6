// Package embedetcd runs a single-member etcd server in the calling
// process, on loopback ports: the server of `demo cluster`, and, through
// internal/etcdtest, of the tests.
//
// StartDir starts one keeping its data in a directory; the caller stops
// it with Stop. StartDirWith takes Options: TLS for clients (with or
// without client-certificate authentication), etcd authentication with a
// root user, the cost of password checks and JWT tokens.
package embedetcd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	opts   Options

	mu   sync.Mutex
	etcd *embed.Etcd // nil while stopped
}

// Options tune StartDirWith. The zero value is a plain
// server: HTTP, no authentication.
type Options struct {
	// TLS, when not nil, makes the server listen for clients over TLS
	// (https:// endpoint) with TLS.CertFile and TLS.KeyFile.
	TLS *TLS
	// RootPassword, when not empty, turns etcd authentication on: the
	// server starts, a user "root" with this password and the root role is
	// created, and auth is enabled, before StartDirWith returns. Clients then
	// need a user name and password (or, with TLS.ClientCertAuth, a client
	// certificate whose common name is a user).
	RootPassword string
	// BcryptCost is the cost of the bcrypt hash of every password the
	// server stores (etcd's --bcrypt-cost, 4 to 31); it sets how long each
	// authentication with a password takes the server. Each step doubles
	// it. Zero means etcd's default, 10. It applies to passwords set while
	// the server runs with it.
	BcryptCost int
	// JWTTokenTTL, when positive, makes the server hand out JWT tokens
	// (HS256, with a random key kept in the data directory) valid for
	// this long, instead of etcd's default simple tokens. Unlike a simple
	// token, a JWT token carries the auth revision it was issued at, so
	// any change to users or roles makes it stale (ErrAuthOldRevision),
	// and it expires this long after it was issued however often it is
	// used.
	JWTTokenTTL time.Duration
}

// TLS is the client-side TLS of the server (peer traffic stays plain; the
// server has a single member).
type TLS struct {
	// CertFile and KeyFile are the server's certificate and key (PEM). The
	// certificate must be valid for 127.0.0.1. Required.
	CertFile, KeyFile string
	// CAFile is the CA (PEM) that signed CertFile. StartDirWith trusts it
	// when it connects to set up authentication. Required.
	CAFile string
	// ClientCertAuth makes the server require, on every connection, a
	// client certificate signed by CAFile. (etcd requires client
	// certificates whenever it is given a trusted CA file, so there is no
	// CA for client certificates without this.)
	ClientCertAuth bool
	// AdminCertFile and AdminKeyFile are a client certificate of CAFile's
	// CA that StartDirWith presents to create the root user when both
	// ClientCertAuth and RootPassword are set.
	AdminCertFile, AdminKeyFile string
}

// StartDir starts a server keeping its data in dir (created if missing; an
// existing member's data is reused), listening for clients and peers on
// free loopback ports. It blocks until the server serves or ReadyTimeout
// passes. Logs are discarded unless BATON_ETCD_LOG=1. The caller must call
// Stop.
func StartDir(dir string) (*Server, error) {
	return StartDirWith(dir, Options{})
}

// StartDirWith is StartDir with opts. With opts.RootPassword it also
// enables authentication (see Options) before it returns; on a data
// directory where auth is already enabled, that step is skipped.
func StartDirWith(dir string, opts Options) (*Server, error) {
	if t := opts.TLS; t != nil && (t.CertFile == "" || t.KeyFile == "" || t.CAFile == "") {
		return nil, errors.New("embedetcd: TLS needs CertFile, KeyFile and CAFile")
	}
	if c := opts.BcryptCost; c != 0 && (c < 4 || c > 31) {
		return nil, fmt.Errorf("embedetcd: BcryptCost %d: must be 4 to 31 (or 0: the default)", c)
	}
	scheme := "http"
	if opts.TLS != nil {
		scheme = "https"
	}
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
			client: url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", cport)},
			peer:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pport)},
			opts:   opts,
		}
		if lastErr = s.start(); lastErr == nil {
			if opts.RootPassword != "" {
				if err := s.enableAuth(); err != nil {
					s.Stop()
					return nil, err
				}
			}
			return s, nil
		}
	}
	return nil, lastErr
}

// enableAuth creates the root user with the root role and enables
// authentication, unless it is enabled already.
func (s *Server) enableAuth() error {
	cfg := clientv3.Config{
		Endpoints:   []string{s.Endpoint()},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
	if t := s.opts.TLS; t != nil {
		info := transport.TLSInfo{TrustedCAFile: t.CAFile}
		if t.ClientCertAuth {
			info.CertFile, info.KeyFile = t.AdminCertFile, t.AdminKeyFile
		}
		tc, err := info.ClientConfig()
		if err != nil {
			return fmt.Errorf("embedetcd: admin client TLS: %w", err)
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return fmt.Errorf("embedetcd: admin client: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cli.AuthStatus(ctx)
	if err != nil {
		return fmt.Errorf("embedetcd: auth status: %w", err)
	}
	if st.Enabled {
		return nil
	}
	if _, err := cli.UserAdd(ctx, "root", s.opts.RootPassword); err != nil {
		return fmt.Errorf("embedetcd: add user root: %w", err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return fmt.Errorf("embedetcd: grant root role: %w", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("embedetcd: enable auth: %w", err)
	}
	return nil
}

// Endpoint is the client URL, e.g. "http://127.0.0.1:23791" (https://
// with Options.TLS).
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
		return errors.New("embedetcd: already running")
	}
	cfg := embed.NewConfig()
	cfg.Name = "baton-test"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.client}
	cfg.AdvertiseClientUrls = []url.URL{s.client}
	cfg.ListenPeerUrls = []url.URL{s.peer}
	cfg.AdvertisePeerUrls = []url.URL{s.peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if t := s.opts.TLS; t != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile}
		if t.ClientCertAuth {
			cfg.ClientTLSInfo.TrustedCAFile = t.CAFile
			cfg.ClientTLSInfo.ClientCertAuth = true
		}
	}
	if s.opts.BcryptCost != 0 {
		cfg.BcryptCost = uint(s.opts.BcryptCost)
	}
	if ttl := s.opts.JWTTokenTTL; ttl > 0 {
		key, err := jwtKey(s.dir)
		if err != nil {
			return err
		}
		cfg.AuthToken = fmt.Sprintf("jwt,priv-key=%s,sign-method=HS256,ttl=%s", key, ttl)
	}
	cfg.UnsafeNoFsync = true // tests and demos: speed over durability across OS crashes
	if os.Getenv("BATON_ETCD_LOG") == "1" {
		cfg.LogLevel = "info"
		cfg.LogOutputs = []string{"stderr"}
	} else {
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("embedetcd: start in %s: %w", s.dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("embedetcd: start in %s: %w", s.dir, err)
	case <-time.After(ReadyTimeout):
		e.Close()
		return fmt.Errorf("embedetcd: start in %s: not ready after %v", s.dir, ReadyTimeout)
	}
	s.etcd = e
	return nil
}

// jwtKey returns the file of the server's JWT signing key in dir, made
// with random bytes the first time.
func jwtKey(dir string) (string, error) {
	file := filepath.Join(dir, "baton-jwt-hs256.key")
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("embedetcd: JWT key: %w", err)
	}
	if err := os.WriteFile(file, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
		return "", fmt.Errorf("embedetcd: JWT key: %w", err)
	}
	return file, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("embedetcd: pick a port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
