package consultest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/envtest"
)

// startCluster starts 3 servers and a client agent joined to all of them,
// stopped in t.Cleanup (with the tails of their logs if t failed).
func startCluster(t *testing.T, ctx context.Context) (servers []*consultest.Agent, client *consultest.Agent) {
	t.Helper()
	if _, err := consultest.Binary(); err != nil {
		envtest.Unavailable(t, "%v", err)
	}
	began := time.Now()
	servers, err := consultest.StartServers(ctx, 3, consultest.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	all := slices.Clone(servers)
	t.Cleanup(func() {
		for _, a := range all {
			if t.Failed() {
				t.Logf("%s log (%s), tail:\n%s", a.NodeName, a.LogPath, a.LogTail(4096))
			}
			a.Close()
		}
	})
	t.Logf("3 servers ready in %v", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	client, err = consultest.Start(ctx, consultest.Options{Join: consultest.JoinAddrs(servers)})
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, client)
	t.Logf("client agent %s ready in %v", client.NodeName, time.Since(began).Round(time.Millisecond))
	return servers, client
}

// waitFor polls cond every 100 ms until it returns nil, failing t with
// its last error after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(began).Round(time.Millisecond)
		}
		if time.Since(began) > d {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// within returns a context bounding one step.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func memberStatuses(c *api.Client) (map[string]int, error) {
	ms, err := c.Agent().Members(false)
	if err != nil {
		return nil, err
	}
	st := make(map[string]int, len(ms))
	for _, m := range ms {
		st[m.Name] = m.Status
	}
	return st, nil
}

// allAlive returns nil when c's members (c is a server's client) show
// every one of servers alive.
func allAlive(c *api.Client, servers []*consultest.Agent) error {
	st, err := memberStatuses(c)
	if err != nil {
		return err
	}
	for _, s := range servers {
		if st[s.NodeName] != consultest.MemberAlive {
			return fmt.Errorf("members: %v", st)
		}
	}
	return nil
}

func getKey(c *api.Client, key, want string) error {
	p, _, err := c.KV().Get(key, nil)
	switch {
	case err != nil:
		return err
	case p == nil:
		return fmt.Errorf("%s: no key", key)
	case string(p.Value) != want:
		return fmt.Errorf("%s = %q, want %q", key, p.Value, want)
	}
	return nil
}

// sessionGone is nil once the session no longer exists.
func sessionGone(c *api.Client, id string) error {
	s, _, err := c.Session().Info(id, nil)
	if err != nil {
		return err
	}
	if s != nil {
		return fmt.Errorf("session %s still exists", id)
	}
	return nil
}

// TestCluster_Faults runs the production layout (3 servers, a client agent
// joined to all of them) through operator faults, in order: the raft
// leader is killed (a new one is elected, the client agent keeps serving
// keys) and restarted (it rejoins); the new leader is restarted
// gracefully (the cluster keeps 3 servers and a leader); the client agent is killed (its node
// fails: its session with serfHealth is invalidated, its session without
// checks survives), force-left (its node leaves: that session is deleted
// too), restarted (its node is alive again, serving keys), killed and
// restarted at once (its session without checks survives), then restarted
// gracefully (it leaves, which deletes its sessions, and rejoins).
func TestCluster_Faults(t *testing.T) {
	began := time.Now()
	servers, client := startCluster(t, within(t, 90*time.Second))
	names := map[string]bool{}
	for _, s := range servers {
		if s.ServerAddr == "" || names[s.NodeName] {
			t.Fatalf("server %s: ServerAddr %q; node names so far %v", s.NodeName, s.ServerAddr, names)
		}
		names[s.NodeName] = true
	}
	if client.ServerAddr != "" {
		t.Fatalf("client agent has a ServerAddr: %s", client.ServerAddr)
	}
	cc, err := client.Client("")
	if err != nil {
		t.Fatal(err)
	}
	const key, val = "baton/cluster", "v1"
	if _, err := cc.KV().Put(&api.KVPair{Key: key, Value: []byte(val)}, nil); err != nil {
		t.Fatal(err)
	}

	var leader, killed *consultest.Agent
	if !t.Run("KillLeader", func(t *testing.T) {
		var err error
		if killed, err = consultest.Leader(within(t, 10*time.Second), servers); err != nil {
			t.Fatal(err)
		}
		killed.Kill()
		at := time.Now()
		if leader, err = consultest.Leader(within(t, 20*time.Second), servers); err != nil {
			t.Fatal(err)
		}
		elected := time.Since(at).Round(time.Millisecond)
		if leader == killed {
			t.Fatalf("Leader returned the killed server %s", killed.NodeName)
		}
		read := waitFor(t, 20*time.Second, "read the key through the client agent", func() error { return getKey(cc, key, val) })
		t.Logf("killed leader %s; %s elected %v later; key read through the client agent after %v more", killed.NodeName, leader.NodeName, elected, read)
		lc, err := leader.Client("")
		if err != nil {
			t.Fatal(err)
		}
		status, err := leader.WaitServerDown(within(t, 30*time.Second), killed.NodeName)
		if err != nil {
			t.Fatal(err)
		}
		seen := "failed"
		if status == consultest.MemberLeft {
			// Reaped: autopilot took it out of the raft peers first.
			peers, err := lc.Status().Peers()
			if err != nil || slices.Contains(peers, killed.ServerAddr) {
				t.Fatalf("%s seen left after its kill, yet raft peers %v (%v) still hold %s: not reaped by autopilot", killed.NodeName, peers, err, killed.ServerAddr)
			}
			seen = "failed and reaped by autopilot (left, out of the raft peers)"
		}
		t.Logf("the new leader saw %s %s %v after the kill", killed.NodeName, seen, time.Since(at).Round(time.Millisecond))
		if _, err := cc.KV().Put(&api.KVPair{Key: key + "-2", Value: []byte("with 2 servers")}, nil); err != nil {
			t.Fatalf("write through the client agent with 2 servers: %v", err)
		}
		peers, err := lc.Status().Peers()
		t.Logf("raft peers with %s failed: %v (%v)", killed.NodeName, peers, err)
	}) {
		return
	}

	if !t.Run("RestartKilledServer", func(t *testing.T) {
		at := time.Now()
		if err := killed.Restart(within(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s restarted (ready) in %v", killed.NodeName, time.Since(at).Round(time.Millisecond))
		lc, err := leader.Client("")
		if err != nil {
			t.Fatal(err)
		}
		d := waitFor(t, 20*time.Second, "3 servers alive in the leader's members, 3 raft peers", func() error {
			if err := allAlive(lc, servers); err != nil {
				return err
			}
			peers, err := lc.Status().Peers()
			if err != nil {
				return err
			}
			if !slices.Contains(peers, killed.ServerAddr) || len(peers) != 3 {
				return fmt.Errorf("raft peers %v, want 3 with %s", peers, killed.ServerAddr)
			}
			return nil
		})
		l, err := consultest.Leader(within(t, 20*time.Second), servers)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := killed.Client("")
		if err != nil {
			t.Fatal(err)
		}
		if seen, err := kc.Status().Leader(); err != nil || seen != l.ServerAddr {
			t.Fatalf("restarted %s names leader %q (%v), want %s", killed.NodeName, seen, err, l.ServerAddr)
		}
		t.Logf("3 servers alive and 3 raft peers %v after the restart; leader %s", d, l.NodeName)
		if err := getKey(cc, key, val); err != nil {
			t.Fatal(err)
		}
	}) {
		return
	}

	if !t.Run("RestartLeaderGracefully", func(t *testing.T) {
		old, err := consultest.Leader(within(t, 10*time.Second), servers)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		if err := old.Restart(within(t, 40*time.Second)); err != nil {
			t.Fatal(err)
		}
		restarted := time.Since(at).Round(time.Millisecond)
		if leader, err = consultest.Leader(within(t, 20*time.Second), servers); err != nil {
			t.Fatal(err)
		}
		lc, err := leader.Client("")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "3 servers alive in the leader's members", func() error { return allAlive(lc, servers) })
		// The client agent's first request after a server restart can
		// fail: "rpc error making call: stream closed".
		var first error
		wrote := waitFor(t, 10*time.Second, "write through the client agent", func() error {
			_, err := cc.KV().Put(&api.KVPair{Key: key + "-3", Value: []byte("after a graceful restart")}, nil)
			if first == nil {
				first = err
			}
			return err
		})
		t.Logf("leader %s restarted gracefully in %v; leader now %s; a write through the client agent went through %v later (first error: %v)",
			old.NodeName, restarted, leader.NodeName, wrote, first)
	}) {
		return
	}

	node := client.NodeName
	var withCheck, noChecks string
	if !t.Run("KillClient", func(t *testing.T) {
		var err error
		if withCheck, _, err = cc.Session().Create(&api.SessionEntry{Name: "serfHealth", TTL: "600s"}, nil); err != nil {
			t.Fatal(err)
		}
		if noChecks, _, err = cc.Session().CreateNoChecks(&api.SessionEntry{Name: "no checks", TTL: "600s"}, nil); err != nil {
			t.Fatal(err)
		}
		client.Kill()
		at := time.Now()
		if err := leader.WaitMemberStatus(within(t, 30*time.Second), node, consultest.MemberFailed); err != nil {
			t.Fatal(err)
		}
		t.Logf("the leader saw %s failed %v after the kill", node, time.Since(at).Round(time.Millisecond))
		lc, err := leader.Client("")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the session with serfHealth invalidated", func() error { return sessionGone(lc, withCheck) })
		if err := sessionGone(lc, noChecks); err == nil {
			t.Fatal("the session without checks went with the node's failure")
		}
	}) {
		return
	}

	if !t.Run("ForceLeaveClient", func(t *testing.T) {
		lc, err := leader.Client("")
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		if err := servers[0].ForceLeave(within(t, 10*time.Second), node); err != nil {
			t.Fatal(err)
		}
		for _, s := range servers {
			if err := s.WaitMemberStatus(within(t, 10*time.Second), node, consultest.MemberLeft); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 10*time.Second, "the session without checks deleted", func() error { return sessionGone(lc, noChecks) })
		waitFor(t, 10*time.Second, "the node deregistered", func() error {
			n, _, err := lc.Catalog().Node(node, nil)
			if err != nil || n != nil {
				return fmt.Errorf("catalog node %s: %v, %v", node, n, err)
			}
			return nil
		})
		t.Logf("%s left, its session and catalog node gone, %v after the force-leave", node, time.Since(at).Round(time.Millisecond))
	}) {
		return
	}

	if !t.Run("RestartKilledClient", func(t *testing.T) {
		at := time.Now()
		if err := client.Restart(within(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
		if client.NodeName != node {
			t.Fatalf("node name changed across Restart: %s, then %s", node, client.NodeName)
		}
		for _, s := range servers {
			if err := s.WaitMemberStatus(within(t, 10*time.Second), node, consultest.MemberAlive); err != nil {
				t.Fatal(err)
			}
		}
		if err := getKey(cc, key, val); err != nil {
			t.Fatal(err)
		}
		t.Logf("force-left %s restarted, alive to every server, serving keys, in %v", node, time.Since(at).Round(time.Millisecond))
	}) {
		return
	}

	// restartClient restarts the client agent (within d), waits until the
	// leader sees it alive and it serves the key, and returns how long the
	// restart took.
	restartClient := func(t *testing.T, d time.Duration) time.Duration {
		t.Helper()
		at := time.Now()
		if err := client.Restart(within(t, d)); err != nil {
			t.Fatal(err)
		}
		restarted := time.Since(at).Round(time.Millisecond)
		if err := leader.WaitMemberStatus(within(t, 10*time.Second), node, consultest.MemberAlive); err != nil {
			t.Fatal(err)
		}
		if err := getKey(cc, key, val); err != nil {
			t.Fatal(err)
		}
		return restarted
	}
	if !t.Run("KillAndRestartClient", func(t *testing.T) {
		withCheck, _, err := cc.Session().Create(&api.SessionEntry{Name: "serfHealth", TTL: "600s"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		noChecks, _, err := cc.Session().CreateNoChecks(&api.SessionEntry{Name: "no checks", TTL: "600s"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		client.Kill()
		restarted := restartClient(t, 30*time.Second)
		if err := sessionGone(cc, noChecks); err == nil {
			t.Fatal("the session without checks went with the kill and restart of its agent")
		}
		fate := "survived"
		if sessionGone(cc, withCheck) == nil {
			fate = "was invalidated: the node failed before it came back"
		}
		t.Logf("%s killed and restarted at once in %v; its session without checks survived; its session with serfHealth %s", node, restarted, fate)
	}) {
		return
	}

	t.Run("RestartClientGracefully", func(t *testing.T) {
		s, _, err := cc.Session().CreateNoChecks(&api.SessionEntry{Name: "no checks", TTL: "600s"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		restarted := restartClient(t, 40*time.Second)
		if err := sessionGone(cc, s); err != nil {
			t.Fatalf("after a graceful restart (a leave) of its agent: %v", err)
		}
		t.Logf("%s restarted gracefully in %v; its session without checks was deleted by the leave", node, restarted)
	})
	t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
}

// TestStartServers_Options checks StartServers' refusals, which need no
// consul binary.
func TestStartServers_Options(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		n    int
		opts consultest.Options
		want string
	}{
		{3, consultest.Options{Binary: "consul"}, "DataDir"},
		{3, consultest.Options{Binary: "consul", DataDir: t.TempDir(), Join: "127.0.0.1:8301"}, "Join"},
		{0, consultest.Options{Binary: "consul", DataDir: t.TempDir()}, "0 servers"},
	} {
		if _, err := consultest.StartServers(ctx, tc.n, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("StartServers(%d, %+v): %v, want an error about %s", tc.n, tc.opts, err, tc.want)
		}
	}
}
