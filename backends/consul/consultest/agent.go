// Package consultest runs a real Consul agent for tests: on free loopback
// ports, quiet (log level warn, output to a file), stopped by Close. Start
// is usable from any program (e2e, demos); StartT wraps it for tests,
// skipping loudly (or failing under BATON_TEST_REQUIRE=1) when no consul
// binary is found.
//
// Three kinds of agent:
//   - by default a dev agent: a single server keeping its state in memory;
//   - with Options.DataDir a single server (-server -bootstrap-expect=1)
//     keeping its raft state in that directory, so that Restart stops and
//     starts it without losing keys, sessions or indexes;
//   - with Options.Join a client agent joined to such a server (or to
//     several), as production hosts run one: its own node, data directory
//     and ports, so that it can be killed and its node failed, force-left
//     or deregistered while the server keeps running.
//
// StartServers runs the production layout's servers instead: n servers
// with data directories, joined to each other, for client agents to join
// (Options.Join, JoinAddrs). Kill, Restart, Leader, ForceLeave and
// WaitMemberStatus then inject and observe operator faults.
//
// The binary is found in this order: $CONSUL_BIN, <repo>/.bin/consul
// (built by tools/consul/build.sh), consul on $PATH.
package consultest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/internal/testenv"
)

// NodeName is the agent's node name: sessions are created on it, so an
// ACL policy for sessions names it (session "baton-test" { policy = "write" }).
const NodeName = "baton-test"

// stopGrace is how long Close and Restart wait after SIGTERM before they
// send SIGKILL.
const stopGrace = 10 * time.Second

// Agent is a running Consul agent: `consul agent -dev`, a server with a
// data directory (Options.DataDir), or a client agent joined to a server
// (Options.Join). Its methods are safe for concurrent use. Close stops it.
type Agent struct {
	// HTTPAddr is the agent's HTTP API address (host:port). It stays the
	// same across Restart.
	HTTPAddr string
	// SerfLANAddr is the agent's gossip (serf LAN) address (host:port):
	// what a client agent joins (Options.Join).
	SerfLANAddr string
	// ServerAddr is the agent's server RPC address (host:port), the form
	// /v1/status/leader and /v1/status/peers name servers in; empty for a
	// client agent, which has no server port.
	ServerAddr string
	// NodeName is the agent's node name: the node its sessions belong to.
	NodeName string
	// Dir is the agent's directory: Options.DataDir, or a temporary
	// directory that Close removes.
	Dir string
	// LogPath is the file receiving the agent's output (in Dir). Restart
	// appends to it.
	LogPath string
	// Binary is the consul binary running.
	Binary string
	// HTTPSAddr is the agent's HTTPS API address (host:port) when it was
	// started with Options.TLS; empty otherwise.
	HTTPSAddr string
	// ManagementToken is the ACL token with every permission when the
	// agent was started with Options.ACLManagementToken; empty otherwise.
	ManagementToken string

	args    []string      // after the binary; the same at every start
	timeout time.Duration // readiness bound of every start
	keepDir bool          // Options.DataDir: Close keeps Dir
	dev     bool          // a dev agent: state in memory, no Restart; ready once its node is registered

	mu     sync.Mutex
	cmd    *exec.Cmd     // the current process
	exited chan struct{} // closed when cmd has been waited for
	err    error         // cmd's exit error, set before exited closes
}

// Start runs an agent (a dev agent unless Options say otherwise) on free
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
	if opts.Join != "" && (opts.ACLManagementToken != "" || opts.TLS != nil || opts.DataDir != "") {
		return nil, errors.New("consultest: Options.Join: a client agent cannot have ACLManagementToken, TLS or DataDir")
	}
	var lastErr error
	for range 3 { // a free port can be taken between probe and use
		a, err := newAgent(bin, opts, 1)
		if err != nil {
			return nil, err
		}
		if lastErr = a.start(ctx); lastErr == nil {
			return a, nil
		}
		a.Close()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// errExited marks a start that failed because the process exited before
// it was ready (a port taken since it was picked, most often): trying
// again on other ports may help.
var errExited = errors.New("agent exited")

// start runs the agent's process and waits until it is ready. On error
// the process is stopped.
func (a *Agent) start(ctx context.Context) error {
	logf, err := os.OpenFile(a.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(a.Binary, a.args...)
	cmd.Dir = a.Dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // no terminal signals
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("consultest: start %s: %w", a.Binary, err)
	}
	exited := make(chan struct{})
	a.mu.Lock()
	a.cmd, a.exited, a.err = cmd, exited, nil
	a.mu.Unlock()
	go func() { // owned by the Agent: stop waits for it
		err := cmd.Wait()
		a.mu.Lock()
		a.err = err
		a.mu.Unlock()
		close(exited)
	}()
	wctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if err := a.waitReady(wctx, exited); err != nil {
		log := a.LogTail(4096)
		a.stop()
		return fmt.Errorf("consultest: agent %s on %s not ready: %w\n%s", a.NodeName, a.HTTPAddr, err, log)
	}
	return nil
}

// waitReady polls the agent until it knows a raft leader and the catalog
// holds its node: with a passing serfHealth check, unless it is a dev
// agent.
func (a *Agent) waitReady(ctx context.Context, exited <-chan struct{}) error {
	var last error
	for {
		select {
		case <-exited:
			a.mu.Lock()
			err := a.err
			a.mu.Unlock()
			return fmt.Errorf("%w: %v", errExited, err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
		if last = a.ready(ctx); last == nil {
			return nil
		}
	}
}

// ready reports why the agent is not ready yet, or nil.
func (a *Agent) ready(ctx context.Context) error {
	var leader string
	if err := a.getJSON(ctx, "/v1/status/leader", &leader); err != nil || leader == "" {
		return fmt.Errorf("no raft leader yet (%v)", err)
	}
	if a.dev {
		var node *struct{ Node *struct{ Node string } }
		if err := a.getJSON(ctx, "/v1/catalog/node/"+url.PathEscape(a.NodeName), &node); err != nil || node == nil || node.Node == nil {
			return fmt.Errorf("node not registered yet (%v)", err)
		}
		return nil
	}
	// After a Kill and Restart the catalog still holds the node, with a
	// critical serfHealth check until the leader sees the new process.
	var checks []struct{ CheckID, Status string }
	if err := a.getJSON(ctx, "/v1/health/node/"+url.PathEscape(a.NodeName), &checks); err != nil {
		return fmt.Errorf("node health: %v", err)
	}
	for _, c := range checks {
		if c.CheckID == "serfHealth" {
			if c.Status != "passing" {
				return fmt.Errorf("node's serfHealth check is %s", c.Status)
			}
			return nil
		}
	}
	return errors.New("node not registered yet")
}

// do sends an HTTP request to the agent's API, with its management token
// if it has one, and returns the body of a 200 answer.
func (a *Agent) do(ctx context.Context, method, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+a.HTTPAddr+path, nil)
	if err != nil {
		return nil, err
	}
	if a.ManagementToken != "" {
		req.Header.Set("X-Consul-Token", a.ManagementToken)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// httpClient keeps no idle connections: agents are restarted on the same
// ports.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// getJSON decodes the answer to GET path into v.
func (a *Agent) getJSON(ctx context.Context, path string, v any) error {
	b, err := a.do(ctx, "GET", path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Restart stops the agent (SIGTERM, then SIGKILL after 10 s; nothing if
// it was killed or has exited) and starts it again on the same ports,
// node name and data directory, then waits until it is ready, as Start
// does. It works for a server with Options.DataDir (alone or one of
// StartServers: keys, sessions and indexes survive; Consul resets session
// TTL timers when its leader is elected) and for a client agent
// (Options.Join), which joins its servers again. A dev agent keeps its
// state in memory, and Restart refuses it.
//
// A client agent leaves the cluster on SIGTERM: its servers deregister
// its node, which deletes the node's sessions, and register it again when
// it is back. A killed one only comes back alive, sessions intact, unless
// its node was force-left or deregistered in between.
func (a *Agent) Restart(ctx context.Context) error {
	if a.dev {
		return errors.New("consultest: Restart needs an agent started with Options.DataDir or Options.Join (a dev agent keeps its state in memory)")
	}
	a.stop()
	var err error
	for range 20 { // the old listeners may take a moment to be released
		if err = a.start(ctx); err == nil || !errors.Is(err, errExited) || ctx.Err() != nil {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

// running reports whether the agent's process has been started and has
// not exited.
func (a *Agent) running() bool {
	a.mu.Lock()
	exited := a.exited
	a.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the current process, then SIGKILL after
// stopGrace, and waits for it to exit. It returns at once if the process
// has already exited.
func (a *Agent) stop() {
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopGrace):
		_ = cmd.Process.Kill()
		<-exited
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
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
	<-exited
}

// Close stops the agent (SIGTERM, then SIGKILL after 10 s) and waits for
// it to exit; then it removes the agent's directory, unless that is
// Options.DataDir. A client agent leaves the cluster gracefully on
// SIGTERM. Close after Kill only removes the directory.
func (a *Agent) Close() error {
	a.stop()
	if a.keepDir {
		return nil
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
