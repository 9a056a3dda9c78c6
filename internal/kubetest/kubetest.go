// Package kubetest runs a real Kubernetes API server for tests: the
// kube-apiserver that tools/kube builds, on an etcd server that
// tools/etcd builds, both on free loopback ports, quiet (output to files
// in the server's directory), stopped by Close.
//
// The server authenticates one static bearer token (Token) in the
// system:masters group, and client certificates its CA signs
// (ClientCert), and authorizes with RBAC, so tests can also make
// tokens for users that hold only the Role a deployment grants
// (Options.Users). It serves TLS with a certificate from a throwaway CA
// (CAFile).
//
// The binaries are found in this order: $KUBE_APISERVER_BIN, then
// <repo>/.bin/kube-apiserver; $ETCD_BIN, then <repo>/.bin/etcd. Debian's
// etcd on $PATH is not used: kube-apiserver needs etcd 3.5.13 or later.
package kubetest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/certtest"
	"github.com/batonhq/baton/internal/envtest"
)

// Token is the bearer token of the server's administrator (group
// system:masters).
const Token = "baton-test-admin-token"

// ErrNoBinary is returned by Start when kube-apiserver or etcd is not
// built.
var ErrNoBinary = errors.New("kubetest: no kube-apiserver or etcd binary (run make tools, or set KUBE_APISERVER_BIN and ETCD_BIN)")

// readyBound is how long Start waits for each process to answer.
const readyBound = 60 * time.Second

// Server is a running etcd and kube-apiserver pair. Close stops both.
type Server struct {
	// URL is the API server's address, https://127.0.0.1:PORT.
	URL string
	// CAFile is the PEM file of the CA that signed the server's
	// certificate.
	CAFile string
	// Dir holds the data, certificates and logs; Close removes it.
	Dir string

	etcd, api *exec.Cmd
	etcdDone  chan struct{}
	apiDone   chan struct{}

	// What faults.go needs to start the processes again.
	mu                sync.Mutex
	apiBin, etcdBin   string
	apiArgs, etcdArgs []string
	etcdURL           string
	pool              *x509.CertPool
	ca                *certtest.CA
	second            []*exec.Cmd // more API servers on the same etcd
	secondDone        []chan struct{}
}

// Options adjusts Start.
type Options struct {
	// Users are extra bearer tokens, each for a user name outside every
	// group: token -> user. RBAC gives them nothing until a test binds
	// a Role to them.
	Users map[string]string
}

// StartT starts a server for t and closes it when t's test ends. Without
// the binaries it skips t loudly, or fails it under BATON_TEST_REQUIRE=1.
func StartT(t testing.TB, opts Options) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), dir, opts)
	if errors.Is(err, ErrNoBinary) {
		os.RemoveAll(dir)
		envtest.Unavailable(t, "%v", err)
	}
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts etcd and kube-apiserver with their state in dir, and
// returns once the API server's /readyz answers 200.
func Start(ctx context.Context, dir string, opts Options) (*Server, error) {
	api, etcd, err := binaries()
	if err != nil {
		return nil, err
	}
	ca, err := certtest.NewCA(dir, "kube")
	if err != nil {
		return nil, err
	}
	pair, err := ca.Server("apiserver")
	if err != nil {
		return nil, err
	}
	saKey := filepath.Join(dir, "sa.key")
	if err := writeKey(saKey); err != nil {
		return nil, err
	}
	tokens := fmt.Sprintf("%s,baton-test-admin,uid-admin,\"system:masters\"\n", Token)
	for tok, user := range opts.Users {
		tokens += fmt.Sprintf("%s,%s,uid-%s\n", tok, user, user)
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
		return nil, err
	}
	ports, err := envtest.FreePorts(3)
	if err != nil {
		return nil, err
	}
	s := &Server{URL: fmt.Sprintf("https://127.0.0.1:%d", ports[2]), CAFile: ca.CertFile, Dir: dir}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s.apiBin, s.etcdBin, s.etcdURL, s.pool, s.ca = api, etcd, etcdURL, ca.Pool(), ca
	s.etcdArgs = []string{"--name", "kubetest", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "kubetest=" + peerURL, "--unsafe-no-fsync", "--log-level", "warn"}
	s.etcd, s.etcdDone, err = launch(filepath.Join(dir, "etcd.log"), etcd, s.etcdArgs...)
	if err != nil {
		return nil, err
	}
	if err := s.wait(ctx, etcdURL+"/health", s.etcdDone, nil); err != nil {
		s.Close()
		return nil, fmt.Errorf("kubetest: etcd: %w (log: %s)", err, filepath.Join(dir, "etcd.log"))
	}
	s.apiArgs = []string{"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(ports[2]),
		"--tls-cert-file", pair.CertFile, "--tls-private-key-file", pair.KeyFile,
		"--token-auth-file", tokenFile, "--client-ca-file", ca.CertFile,
		"--authorization-mode", "RBAC",
		"--service-account-issuer", s.URL,
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--disable-admission-plugins", "ServiceAccount",
		"--v", "1"}
	s.api, s.apiDone, err = launch(filepath.Join(dir, "apiserver.log"), api, s.apiArgs...)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.wait(ctx, s.URL+"/readyz", s.apiDone, ca.Pool()); err != nil {
		s.Close()
		return nil, fmt.Errorf("kubetest: kube-apiserver: %w (log: %s)", err, filepath.Join(dir, "apiserver.log"))
	}
	return s, nil
}

// HTTPClient returns a client that trusts the server's certificate.
func (s *Server) HTTPClient() *http.Client {
	pem, _ := os.ReadFile(s.CAFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// ClientCert issues a client certificate the server accepts: the user
// cn in groups (system:masters makes it an administrator). Its files
// are in Dir.
func (s *Server) ClientCert(cn string, groups ...string) (certtest.Pair, error) {
	return s.ca.ClientIn(cn, groups...)
}

// Close stops both processes (SIGKILL: the state is thrown away), and
// the API servers StartSecondAPI started, and removes Dir.
func (s *Server) Close() {
	s.mu.Lock()
	procs := []*exec.Cmd{s.api, s.etcd}
	dones := []chan struct{}{s.apiDone, s.etcdDone}
	procs, dones = append(procs, s.second...), append(dones, s.secondDone...)
	s.second, s.secondDone = nil, nil
	s.mu.Unlock()
	for i, p := range procs {
		if p != nil {
			p.Process.Signal(syscall.SIGKILL)
			<-dones[i]
		}
	}
	os.RemoveAll(s.Dir)
}

// wait polls url until it answers 200, the process exits or readyBound
// passes.
func (s *Server) wait(ctx context.Context, url string, exited <-chan struct{}, pool *x509.CertPool) error {
	ctx, cancel := context.WithTimeout(ctx, readyBound)
	defer cancel()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+Token)
		resp, err := c.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
		}
		last = err
		select {
		case <-exited:
			return errors.New("exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %v", readyBound, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// launch starts bin with args, its output appended to logPath; the
// channel closes when it has exited.
func launch(logPath, bin string, args ...string) (*exec.Cmd, chan struct{}, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, nil, fmt.Errorf("kubetest: %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		log.Close()
		close(done)
	}()
	return cmd, done, nil
}

// writeKey writes a new ECDSA P-256 private key, the service account
// signing key, as PEM.
func writeKey(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// binaries finds kube-apiserver and etcd.
func binaries() (api, etcd string, err error) {
	root := repoRoot()
	find := func(env, name string) string {
		if p := os.Getenv(env); p != "" {
			return p
		}
		if root == "" {
			return ""
		}
		p := filepath.Join(root, ".bin", name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
		return ""
	}
	api, etcd = find("KUBE_APISERVER_BIN", "kube-apiserver"), find("ETCD_BIN", "etcd")
	if api == "" || etcd == "" {
		return "", "", ErrNoBinary
	}
	return api, etcd, nil
}

// repoRoot finds the root of the baton module, up from this source file.
func repoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	for dir := filepath.Dir(file); ; {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/batonhq/baton\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// The server Main starts for a test binary.
var (
	shared    *Server
	sharedErr error
)

// Main starts one server for a package's tests, runs them, stops the
// server and returns the exit code: call os.Exit(kubetest.Main(m)) from
// TestMain, and Shared from the tests.
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	shared, sharedErr = Start(context.Background(), dir, Options{})
	if sharedErr == nil {
		fmt.Fprintf(os.Stderr, "kubetest: kube-apiserver ready at %s in %v\n", shared.URL, time.Since(start).Round(time.Millisecond))
	}
	code := m.Run()
	if shared != nil {
		shared.Close()
	} else {
		os.RemoveAll(dir)
	}
	return code
}

// Shared returns the server Main started. Without the binaries it skips
// t loudly, or fails it under BATON_TEST_REQUIRE=1; it fails t if the
// server did not start.
func Shared(t testing.TB) *Server {
	t.Helper()
	if errors.Is(sharedErr, ErrNoBinary) {
		envtest.Unavailable(t, "%v", sharedErr)
	}
	if sharedErr != nil {
		t.Fatalf("kubetest: %v", sharedErr)
	}
	if shared == nil {
		t.Fatal("kubetest: Shared without Main in TestMain")
	}
	return shared
}
