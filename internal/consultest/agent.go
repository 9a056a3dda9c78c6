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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/envtest"
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
// envtest.Unavailable (skip loudly, or fail under BATON_TEST_REQUIRE=1).
func StartT(t testing.TB) *Agent {
	t.Helper()
	return StartTWith(t, Options{})
}

// StartTWith is StartT with opts.
func StartTWith(t testing.TB, opts Options) *Agent {
	t.Helper()
	if _, err := Binary(); err != nil {
		envtest.Unavailable(t, "%v", err)
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
