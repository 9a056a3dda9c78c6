package consultest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Serf member statuses, as /v1/agent/members (api.AgentMember.Status) and
// `consul members` report them: what WaitMemberStatus waits for.
const (
	MemberAlive   = 1
	MemberLeaving = 2
	MemberLeft    = 3 // left gracefully, or force-left
	MemberFailed  = 4 // stopped answering gossip probes
)

// StartServers runs the servers of the production layout: n server agents
// on loopback, each `-server -bootstrap-expect=n` with raft_multiplier = 1
// and -retry-join of every other server's serf LAN address. Server i (from
// 1) keeps its state in opts.DataDir/server-i (opts.DataDir is required;
// those directories must hold no earlier cluster's state) and is named
// opts.NodeName + "-i", "baton-server-i" when opts.NodeName is empty. The
// servers start concurrently; StartServers returns once every one knows a
// raft leader and has its node registered with a passing serfHealth
// check, or stops them all and returns an error. opts.Join must be empty;
// opts.StartTimeout bounds each server's wait, at the start and at each
// Restart.
//
// Client agents join them with Options{Join: JoinAddrs(servers)}. Kill
// and Restart work on any of them; Leader tells which leads.
func StartServers(ctx context.Context, n int, opts Options) ([]*Agent, error) {
	if n < 1 {
		return nil, fmt.Errorf("consultest: StartServers: %d servers", n)
	}
	if opts.DataDir == "" {
		return nil, errors.New("consultest: StartServers needs Options.DataDir")
	}
	if opts.Join != "" {
		return nil, errors.New("consultest: StartServers: Options.Join is for client agents")
	}
	if opts.Binary == "" {
		bin, err := Binary()
		if err != nil {
			return nil, err
		}
		opts.Binary = bin
	}
	prefix := opts.NodeName
	if prefix == "" {
		prefix = "baton-server"
	}
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = filepath.Join(opts.DataDir, fmt.Sprintf("server-%d", i+1))
		if ents, err := os.ReadDir(filepath.Join(dirs[i], "data")); err == nil && len(ents) > 0 {
			return nil, fmt.Errorf("consultest: StartServers: %s holds an earlier agent's state", dirs[i])
		}
	}
	var lastErr error
	for range 3 { // a free port can be taken between probe and use
		servers := make([]*Agent, n)
		for i := range servers {
			o := opts
			o.DataDir, o.NodeName = dirs[i], fmt.Sprintf("%s-%d", prefix, i+1)
			a, err := newAgent(opts.Binary, o, n)
			if err != nil {
				return nil, err
			}
			servers[i] = a
		}
		// Every port is known only now.
		for _, a := range servers {
			for _, b := range servers {
				if b != a {
					a.args = append(a.args, "-retry-join="+b.SerfLANAddr)
				}
			}
		}
		if lastErr = startAll(ctx, servers); lastErr == nil {
			return servers, nil
		}
		if !errors.Is(lastErr, errExited) || ctx.Err() != nil {
			break
		}
		// Start again from scratch, on other ports.
		for _, d := range dirs {
			if err := os.RemoveAll(filepath.Join(d, "data")); err != nil {
				return nil, err
			}
		}
	}
	return nil, lastErr
}

// startAll starts agents concurrently: each one's readiness needs the
// others. On the first failure it gives the others up, stops them all and
// returns that failure.
func startAll(ctx context.Context, agents []*Agent) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for _, a := range agents {
		wg.Go(func() {
			if err := a.start(ctx); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		for _, a := range agents {
			a.stop()
		}
	}
	return firstErr
}

// JoinAddrs returns the agents' serf LAN addresses separated by commas:
// Options.Join for a client agent joined to all of them.
func JoinAddrs(agents []*Agent) string {
	addrs := make([]string, len(agents))
	for i, a := range agents {
		addrs[i] = a.SerfLANAddr
	}
	return strings.Join(addrs, ",")
}

// Leader returns the server that is the raft leader now: one whose
// process is running, that a running server among servers names as its
// leader (/v1/status/leader) and that names itself. It polls until there
// is one or ctx ends, so that after the leader was killed it returns the
// leader the others elect.
func Leader(ctx context.Context, servers []*Agent) (*Agent, error) {
	byAddr := make(map[string]*Agent, len(servers))
	for _, s := range servers {
		if s.ServerAddr != "" {
			byAddr[s.ServerAddr] = s
		}
	}
	var last error
	for {
		for _, s := range servers {
			if !s.running() {
				continue
			}
			var addr string
			if err := s.getJSON(ctx, "/v1/status/leader", &addr); err != nil {
				last = err
				continue
			}
			l := byAddr[addr]
			switch {
			case addr == "":
				last = fmt.Errorf("%s knows no leader", s.NodeName)
			case l == nil:
				last = fmt.Errorf("%s names leader %s, none of the servers", s.NodeName, addr)
			case !l.running():
				last = fmt.Errorf("%s names leader %s, which is not running", s.NodeName, l.NodeName)
			default:
				var self string
				if err := l.getJSON(ctx, "/v1/status/leader", &self); err != nil {
					last = err
				} else if self != l.ServerAddr {
					last = fmt.Errorf("%s names leader %s, which names %q", s.NodeName, l.NodeName, self)
				} else {
					return l, nil
				}
			}
		}
		if len(servers) == 0 {
			last = errors.New("no servers")
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("consultest: no raft leader: %w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ForceLeave asks agent a (a server, or any agent of the cluster) to
// force node out of the cluster, as `consul force-leave node` does (PUT
// /v1/agent/force-leave/node): a failed node becomes left (MemberLeft) and
// the leader deregisters it from the catalog, deleting its sessions. A
// node that is still alive rejoins (Consul's documented behaviour; not
// tested here).
func (a *Agent) ForceLeave(ctx context.Context, node string) error {
	if _, err := a.do(ctx, "PUT", "/v1/agent/force-leave/"+url.PathEscape(node)); err != nil {
		return fmt.Errorf("consultest: force-leave %s: %w", node, err)
	}
	return nil
}

// WaitMemberStatus polls agent a's view of the cluster
// (/v1/agent/members) until node has status (MemberAlive, MemberLeft,
// MemberFailed ...) or ctx ends. After a Kill, servers see the node
// failed within seconds (gossip probes, then a suspicion timeout).
func (a *Agent) WaitMemberStatus(ctx context.Context, node string, status int) error {
	_, err := a.waitMember(ctx, node, fmt.Sprintf("status %d", status), func(s int) bool { return s == status })
	return err
}

// WaitServerDown polls agent a's view of the cluster until node, a
// server that was killed, is failed (MemberFailed) or, once failed,
// reaped (MemberLeft), and returns which: Consul's autopilot removes a
// failed server from the raft peers and force-leaves it (its default
// cleanup_dead_servers), which may come before a poll sees it failed.
func (a *Agent) WaitServerDown(ctx context.Context, node string) (int, error) {
	return a.waitMember(ctx, node, "failed or left", func(s int) bool { return s == MemberFailed || s == MemberLeft })
}

// waitMember polls a's view of the cluster until node's status is one
// that ok accepts (want says which, for the error), and returns it.
func (a *Agent) waitMember(ctx context.Context, node, want string, ok func(int) bool) (int, error) {
	last := "not a member"
	for {
		var ms []struct {
			Name   string
			Status int
		}
		if err := a.getJSON(ctx, "/v1/agent/members", &ms); err != nil {
			last = err.Error()
		} else {
			last = "not a member"
			for _, m := range ms {
				if m.Name == node {
					if ok(m.Status) {
						return m.Status, nil
					}
					last = fmt.Sprintf("status %d", m.Status)
				}
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("consultest: %s does not see %s with %s: %w (last: %s)", a.NodeName, node, want, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
