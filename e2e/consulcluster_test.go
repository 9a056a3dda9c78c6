package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/envtest"
)

// Faults of the Consul cluster.
const (
	fConsulKillLeader   = "consul-kill-leader"   // SIGKILL of the raft leader server, started again 1-3 s later
	fConsulRestartAgent = "consul-restart-agent" // a node's client agent stopped gracefully (it leaves) and started again
	fConsulForceLeave   = "consul-force-leave"   // a node's client agent killed, seen failed, force-left, then started again
)

// newConsulCluster is Consul as production runs it: 3 server agents, and
// beside each baton node a client agent of its own, joined to them, which
// the node talks to (through its proxy). Sessions belong to the client
// agent's node, so the client agent's faults are the node's too.
func newConsulCluster(ctx context.Context, dir string) (*backend, error) {
	bin, err := consultest.Binary()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envtest.ErrUnavailable, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	servers, err := consultest.StartServers(sctx, 3, consultest.Options{Binary: bin, DataDir: filepath.Join(dir, "consul")})
	if err != nil {
		return nil, err
	}
	const nodes = 3
	var clients []*consultest.Agent
	closeAll := func() {
		for _, a := range clients {
			a.Close()
		}
		for _, a := range servers {
			a.Close()
		}
	}
	for i := range nodes {
		a, err := consultest.Start(sctx, consultest.Options{Binary: bin, Join: consultest.JoinAddrs(servers),
			NodeName: fmt.Sprintf("baton-client-%d", i+1)})
		if err != nil {
			closeAll()
			return nil, err
		}
		clients = append(clients, a)
	}
	ttl := 10 * time.Second
	be := &backend{
		name: "consul-cluster", topology: "3 Consul server agents and a client agent per node slot (its node owns the node's sessions), the node talking to its own client agent through its proxy",
		targets: func(i int) []string { return []string{clients[i].HTTPAddr} },
		nodes:   nodes, ttl: ttl, grace: 60 * time.Second,
		crashBound: 2*ttl + ttl + consulReaction, handoverBound: 2 * time.Second, faultWake: ttl + consulFaultWake,
		args: func(addrs []string) []string {
			return []string{"--backend", "consul", "--consul-addr", addrs[0]}
		},
		restart: func(ctx context.Context) error {
			for _, s := range servers {
				if err := s.Restart(ctx); err != nil {
					return err
				}
				if _, err := consultest.Leader(ctx, servers); err != nil {
					return err
				}
			}
			return nil
		},
		restartKind: "rolling restart of the 3 servers: each stopped with SIGTERM and started again on its data dir, a raft leader between",
		close:       closeAll,
	}
	// leaderClient is the client agent of the leading node (nil if none
	// leads), or of a random slot.
	agentOf := func(sc *scenario) (*consultest.Agent, string) {
		if l, _ := sc.leader(); l != nil && sc.rng.IntN(3) > 0 {
			return clients[l.slot.i], "the leader's (" + l.id + ")"
		}
		i := sc.rng.IntN(len(clients))
		role := fmt.Sprintf("slot %d's", i+1)
		if s := sc.slots[i]; s.proc != nil {
			role = s.proc.id + "'s"
		}
		return clients[i], role
	}
	be.faults = []backendFault{
		{fConsulKillLeader, func(ctx context.Context, sc *scenario, kind string) error {
			l, err := consultest.Leader(ctx, servers)
			if err != nil {
				return err
			}
			l.Kill()
			sc.note(kind, l.NodeName, "raft leader SIGKILLed")
			sc.pause(time.Second, 3*time.Second)
			nl, err := consultest.Leader(ctx, servers)
			if err != nil {
				return err
			}
			if err := l.Restart(ctx); err != nil {
				return err
			}
			sc.note(kind+"-end", l.NodeName, "started again; %s leads", nl.NodeName)
			return nil
		}},
		{fConsulRestartAgent, func(ctx context.Context, sc *scenario, kind string) error {
			a, whose := agentOf(sc)
			sc.note(kind, a.NodeName, "%s client agent stopped with SIGTERM (it leaves the cluster) and started again", whose)
			if err := a.Restart(ctx); err != nil {
				return err
			}
			sc.note(kind+"-end", a.NodeName, "back")
			return nil
		}},
		{fConsulForceLeave, func(ctx context.Context, sc *scenario, kind string) error {
			a, whose := agentOf(sc)
			l, err := consultest.Leader(ctx, servers)
			if err != nil {
				return err
			}
			a.Kill()
			sc.note(kind, a.NodeName, "%s client agent SIGKILLed", whose)
			from := time.Now()
			if err := l.WaitMemberStatus(ctx, a.NodeName, consultest.MemberFailed); err != nil {
				return err
			}
			failed := time.Since(from)
			if err := l.ForceLeave(ctx, a.NodeName); err != nil {
				return err
			}
			if err := l.WaitMemberStatus(ctx, a.NodeName, consultest.MemberLeft); err != nil {
				return errors.Join(err, a.Restart(ctx))
			}
			sc.note("info-force-left", a.NodeName, "seen failed %v after the kill; force-left through %s", failed.Round(time.Millisecond), l.NodeName)
			if err := a.Restart(ctx); err != nil {
				return err
			}
			sc.note(kind+"-end", a.NodeName, "started again; rejoined")
			return nil
		}},
	}
	return be, nil
}
