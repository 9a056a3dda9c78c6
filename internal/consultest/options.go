package consultest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/envtest"
)

// Options tune Start. The zero value is fine.
type Options struct {
	// Binary is the consul binary; empty means Binary().
	Binary string
	// LogLevel is the agent's log level; empty means "warn".
	LogLevel string
	// StartTimeout bounds the wait for the agent to elect itself and
	// register its node, at Start and at each Restart. Zero means 60 s.
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
	// the servers whose serf LAN addresses (Agent.SerfLANAddr) Join lists,
	// separated by commas (JoinAddrs builds the list for a set of
	// servers). Each address is a -retry-join, retried every second until
	// one answers; once joined, the agent learns every server by gossip and
	// keeps working while some of them are down. Start returns once the
	// servers have registered the client's node with a passing serfHealth
	// check. Not with ACLManagementToken, TLS or DataDir.
	Join string
	// DataDir, when not empty, starts a single server that keeps its state
	// on disk instead of a dev agent: `-server -bootstrap-expect=1` with
	// its raft data in DataDir/data and its log in DataDir/agent.log
	// (DataDir is created if needed, and Close leaves it). Restart then
	// stops and starts it on the same ports and data. A dev agent keeps its
	// state in memory and would start its indexes again from scratch, so a
	// lock's ModifyIndex (a fencing token) would not rise across a restart.
	// Start returns once the node's serfHealth check passes. StartServers
	// keeps server i in DataDir/server-i instead.
	DataDir string
	// NodeName is the agent's node name. Empty means the package's
	// NodeName for a dev agent or a server, and "baton-client-" plus the
	// agent's HTTP port for a client agent; for StartServers, the prefix
	// of the servers' names ("baton-server" when empty). Node names must be
	// unique in a cluster.
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

// newAgent picks the ports, makes the directory and builds the command
// line of an agent; start runs it. expect is the -bootstrap-expect of a
// server with a data directory (1 for Start, n for StartServers).
func newAgent(bin string, opts Options, expect int) (*Agent, error) {
	ports, err := envtest.FreePorts(5)
	if err != nil {
		return nil, err
	}
	dir, keep := opts.DataDir, opts.DataDir != ""
	if keep {
		err = os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	} else {
		dir, err = os.MkdirTemp("", "baton-consul-")
	}
	if err != nil {
		return nil, err
	}
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
	var args []string
	switch {
	case opts.Join != "":
		// A client agent: persistent state in its own directory, joined
		// to the servers (retrying every second, not every 30 s, until
		// one answers).
		args = []string{"agent", "-data-dir=" + filepath.Join(dir, "data"), "-retry-interval=1s"}
		for _, addr := range strings.Split(opts.Join, ",") {
			if addr = strings.TrimSpace(addr); addr != "" {
				args = append(args, "-retry-join="+addr)
			}
		}
	case keep:
		args = []string{"agent", "-server", "-bootstrap-expect=" + strconv.Itoa(expect), "-data-dir=" + filepath.Join(dir, "data"),
			"-advertise=127.0.0.1", "-retry-interval=1s", "-hcl=performance { raft_multiplier = 1 }"}
	default:
		args = []string{"agent", "-dev"}
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
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	serverAddr := ""
	if opts.Join == "" {
		serverAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(server))
	}
	return &Agent{
		HTTPAddr:        net.JoinHostPort("127.0.0.1", strconv.Itoa(http)),
		ServerAddr:      serverAddr,
		SerfLANAddr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(serfLAN)),
		NodeName:        node,
		Dir:             dir,
		LogPath:         filepath.Join(dir, "agent.log"),
		Binary:          bin,
		HTTPSAddr:       httpsAddr,
		ManagementToken: opts.ACLManagementToken,

		args:    args,
		timeout: timeout,
		keepDir: keep,
		dev:     !keep && opts.Join == "",
	}, nil
}
