// Package consultest runs a real Consul dev agent for tests: on free
// loopback ports, quiet (log level warn, output to a file), stopped by
// Close. Start is usable from any program (e2e, demos); StartT wraps it
// for tests, skipping loudly (or failing under BATON_TEST_REQUIRE=1) when
// no consul binary is found. With Options.Join it runs a client agent
// joined to such a server instead, as production hosts run one: its own
// node, data directory and ports, so that it can be killed and its node
// failed, force-left or deregistered while the server keeps running.
//
// The binary is found in this order: $CONSUL_BIN, <repo>/.bin/consul
// (built by tools/consul/build.sh), consul on $PATH.
package consultest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/internal/testenv"
)

// NodeName is the agent's node name: sessions are created on it, so an
// ACL policy for sessions names it (session "baton-test" { policy = "write" }).
const NodeName = "baton-test"

// ErrNoBinary is returned by Binary and Start when no consul binary is
// found.
var ErrNoBinary = errors.New("consultest: no consul binary (set CONSUL_BIN, run tools/consul/build.sh, or put consul on PATH)")

// Binary returns the path of the consul binary to run: $CONSUL_BIN,
// <repo>/.bin/consul, or consul on $PATH, in that order.
func Binary() (string, error) {
	if p := os.Getenv("CONSUL_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("consultest: CONSUL_BIN: %w", err)
		}
		return p, nil
	}
	if root := repoRoot(); root != "" {
		p := filepath.Join(root, ".bin", "consul")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("consul"); err == nil {
		return p, nil
	}
	return "", ErrNoBinary
}

// repoRoot finds the root of the baton module: up from the working
// directory, then up from this source file.
func repoRoot() string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module github.com/batonhq/baton\n")) {
				return dir
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return ""
}

// Agent is a running `consul agent -dev`, or a client agent joined to
// one (Options.Join). Its methods are safe for concurrent use. Close stops
// it.
type Agent struct {
	// HTTPAddr is the agent's HTTP API address (host:port).
	HTTPAddr string
	// SerfLANAddr is the agent's gossip (serf LAN) address (host:port):
	// what a client agent joins (Options.Join).
	SerfLANAddr string
	// NodeName is the agent's node name: the node its sessions belong to.
	NodeName string
	// Dir is the agent's temporary directory, removed by Close.
	Dir string
	// LogPath is the file receiving the agent's output (in Dir).
	LogPath string
	// Binary is the consul binary running.
	Binary string
	// HTTPSAddr is the agent's HTTPS API address (host:port) when it was
	// started with Options.TLS; empty otherwise.
	HTTPSAddr string
	// ManagementToken is the ACL token with every permission when the
	// agent was started with Options.ACLManagementToken; empty otherwise.
	ManagementToken string

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // set before exited closes
}

// Options tune Start. The zero value is fine.
type Options struct {
	// Binary is the consul binary; empty means Binary().
	Binary string
	// LogLevel is the agent's log level; empty means "warn".
	LogLevel string
	// StartTimeout bounds the wait for the agent to elect itself and
	// register its node. Zero means 60 s.
	StartTimeout time.Duration
	// Args are extra arguments to `consul agent`.
	Args []string
	// ACLManagementToken, when not empty, turns ACLs on with default policy
	// "deny": requests without a token (the anonymous token) or with an
	// unknown one are refused. This token (a UUID) is the initial
	// management token, with every permission, and the agent's own token.
	ACLManagementToken string
	// TLS, when not nil, adds an HTTPS listener (Agent.HTTPSAddr) with
	// this certificate; the plain HTTP listener stays.
	TLS *TLS
	// Join, when not empty, starts a client agent instead of a dev server:
	// server = false, its own data directory (under Agent.Dir), joined to
	// the server whose serf LAN address (Agent.SerfLANAddr) Join is. Start
	// returns once the server has registered the client's node. Not with
	// ACLManagementToken or TLS.
	Join string
	// NodeName is the agent's node name. Empty means the package's
	// NodeName for a dev agent, and "baton-client-" plus the agent's HTTP
	// port for a client agent. Node names must be unique in a cluster.
	NodeName string
}

// TLS is the agent's HTTPS listener configuration (PEM files).
type TLS struct {
	// CertFile and KeyFile are the agent's certificate, valid for
	// 127.0.0.1, and its key. Required.
	CertFile, KeyFile string
	// CAFile is the CA that signed CertFile and, with VerifyIncoming,
	// the clients' certificates. Required.
	CAFile string
	// VerifyIncoming makes the HTTPS listener require client
	// certificates signed by CAFile.
	VerifyIncoming bool
}

// Start runs a Consul dev agent (a single server, in-memory data) on free
// loopback ports and waits until it has a raft leader and has registered
// its node, so that sessions can be created. The agent keeps running
// until Close, even if ctx ends after Start returned.
func Start(ctx context.Context, opts Options) (*Agent, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = Binary(); err != nil {
			return nil, err
		}
	}
	if opts.Join != "" && (opts.ACLManagementToken != "" || opts.TLS != nil) {
		return nil, errors.New("consultest: Options.Join: a client agent cannot have ACLManagementToken or TLS")
	}
	var lastErr error
	for range 3 { // a free port can be taken between probe and use
		a, err := start(ctx, bin, opts)
		if err == nil {
			return a, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func start(ctx context.Context, bin string, opts Options) (*Agent, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "baton-consul-")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "agent.log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	level := opts.LogLevel
	if level == "" {
		level = "warn"
	}
	http, serfLAN, serfWAN, server := ports[0], ports[1], ports[2], ports[3]
	node := opts.NodeName
	if node == "" {
		node = NodeName
		if opts.Join != "" {
			node = "baton-client-" + strconv.Itoa(http)
		}
	}
	args := []string{"agent", "-dev"}
	if opts.Join != "" {
		// A client agent: persistent state in its own directory, joined
		// to the server (retrying until the server answers).
		args = []string{"agent", "-data-dir=" + filepath.Join(dir, "data"), "-retry-join=" + opts.Join}
	}
	args = append(args,
		"-node="+node,
		"-bind=127.0.0.1", "-client=127.0.0.1",
		"-http-port="+strconv.Itoa(http),
		"-serf-lan-port="+strconv.Itoa(serfLAN),
		"-serf-wan-port="+strconv.Itoa(serfWAN),
		"-server-port="+strconv.Itoa(server),
		"-dns-port=-1", "-grpc-port=-1", "-grpc-tls-port=-1",
		"-log-level="+level,
		"-hcl=disable_update_check = true",
		"-hcl=connect { enabled = false }",
		"-hcl=peering { enabled = false }",
	)
	httpsAddr := ""
	if t := opts.TLS; t != nil {
		httpsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[4]))
		args = append(args, "-https-port="+strconv.Itoa(ports[4]), fmt.Sprintf(
			`-hcl=tls { defaults { ca_file = %q, cert_file = %q, key_file = %q, verify_incoming = %v } }`,
			t.CAFile, t.CertFile, t.KeyFile, t.VerifyIncoming))
	}
	if tok := opts.ACLManagementToken; tok != "" {
		args = append(args, fmt.Sprintf(
			`-hcl=acl { enabled = true, default_policy = "deny", enable_token_persistence = false, tokens { initial_management = %q, agent = %q } }`,
			tok, tok))
	}
	args = append(args, opts.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // no terminal signals
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("consultest: start %s: %w", bin, err)
	}
	a := &Agent{
		HTTPAddr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(http)),
		SerfLANAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(serfLAN)),
		NodeName:    node,
		Dir:         dir,
		LogPath:     logPath,
		Binary:      bin,
		cmd:         cmd,

		HTTPSAddr:       httpsAddr,
		ManagementToken: opts.ACLManagementToken,
		exited:          make(chan struct{}),
	}
	go func() { // owned by the Agent: Close waits for it
		a.err = cmd.Wait()
		close(a.exited)
	}()
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := a.waitReady(wctx); err != nil {
		log := a.LogTail(4096)
		a.Close()
		return nil, fmt.Errorf("consultest: agent on %s not ready: %w\n%s", a.HTTPAddr, err, log)
	}
	return a, nil
}

func (a *Agent) waitReady(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	get := func(path string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+a.HTTPAddr+path, nil)
		if err != nil {
			return "", err
		}
		if a.ManagementToken != "" {
			req.Header.Set("X-Consul-Token", a.ManagementToken)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("%s: %s", path, resp.Status)
		}
		return strings.TrimSpace(string(b)), err
	}
	var last error
	for {
		select {
		case <-a.exited:
			return fmt.Errorf("agent exited: %v", a.err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
		leader, err := get("/v1/status/leader")
		if err != nil || leader == `""` || leader == "" {
			last = fmt.Errorf("no raft leader yet (%v)", err)
			continue
		}
		node, err := get("/v1/catalog/node/" + a.NodeName)
		if err != nil || node == "null" || !strings.Contains(node, `"Node"`) {
			last = fmt.Errorf("node not registered yet (%v)", err)
			continue
		}
		return nil
	}
}

// Client returns a new API client for the agent, or for addr (host:port,
// e.g. a faultproxy in front of the agent) when addr is not empty. Each
// call makes its own HTTP transport, so clients share no connections. It
// sends no ACL token (whatever CONSUL_HTTP_TOKEN says): on an agent with
// ACLs it acts as the anonymous token.
func (a *Agent) Client(addr string) (*api.Client, error) {
	return a.ClientWithToken(addr, "")
}

// ClientWithToken is Client sending the ACL token token.
func (a *Agent) ClientWithToken(addr, token string) (*api.Client, error) {
	if addr == "" {
		addr = a.HTTPAddr
	}
	cfg := api.DefaultNonPooledConfig()
	cfg.Address = addr
	cfg.Scheme = "http"
	cfg.Token = token
	cfg.TokenFile = ""
	return api.NewClient(cfg)
}

// LogTail returns up to the last n bytes of the agent's output.
func (a *Agent) LogTail(n int) string {
	b, err := os.ReadFile(a.LogPath)
	if err != nil {
		return fmt.Sprintf("(agent log: %v)", err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Kill stops the agent with SIGKILL, as a crash would: a client agent
// does not leave the cluster, so the servers mark its node failed after
// their gossip probes go unanswered. It waits for the process to exit and
// keeps the directory (LogTail still works); Close removes it.
func (a *Agent) Kill() {
	if a.cmd.Process != nil {
		_ = a.cmd.Process.Kill()
	}
	<-a.exited
}

// Close stops the agent (SIGTERM, then SIGKILL after 5 s), waits for it to
// exit and removes its directory. A client agent leaves the cluster
// gracefully on SIGTERM. Close after Kill only removes the directory.
func (a *Agent) Close() error {
	if a.cmd.Process != nil {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(5 * time.Second):
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
	}
	return os.RemoveAll(a.Dir)
}

// StartT starts an agent for t and stops it in t.Cleanup, printing the
// tail of its log if t failed. Without a consul binary it calls
// testenv.Unavailable (skip loudly, or fail under BATON_TEST_REQUIRE=1).
func StartT(t testing.TB) *Agent {
	t.Helper()
	return StartTWith(t, Options{})
}

// StartTWith is StartT with opts.
func StartTWith(t testing.TB, opts Options) *Agent {
	t.Helper()
	if _, err := Binary(); err != nil {
		testenv.Unavailable(t, "%v", err)
	}
	a, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("consul agent log (%s), tail:\n%s", a.LogPath, a.LogTail(8192))
		}
		a.Close()
	})
	return a
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
