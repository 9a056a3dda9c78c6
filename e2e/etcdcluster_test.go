package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/proxytest"
)

// etcdBinary is the etcd server the clustered runs start: $ETCD_BIN,
// <repo>/.bin/etcd (built by `make tools`), or etcd on $PATH.
func etcdBinary() (string, error) {
	if p := os.Getenv("ETCD_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("ETCD_BIN: %w", err)
		}
		return p, nil
	}
	if p, err := filepath.Abs(filepath.Join("..", ".bin", "etcd")); err == nil {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: no etcd server binary (run make tools, set ETCD_BIN, or put etcd on PATH)", envtest.ErrUnavailable)
}

// nopZap silences the etcd clients of the suite.
var nopZap = zap.NewNop()

// etcdMember is one member of an etcdCluster: a separate etcd process.
// Its peers reach it through peer, a fault proxy in front of its peer
// listener (the URL it advertises), so that it can be cut off from them.
type etcdMember struct {
	name   string
	dir    string
	client string // host:port of its client listener
	peer   *proxytest.Proxy
	args   []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	id     uint64 // member ID, once known
}

// etcdCluster is a 3-member etcd cluster, each member a process of its
// own with its data on disk, as etcd runs in production.
type etcdCluster struct {
	bin     string
	members []*etcdMember
}

// startEtcdCluster starts n members under dir and returns once each
// answers and they have a leader.
func startEtcdCluster(dir string, n int) (*etcdCluster, error) {
	bin, err := etcdBinary()
	if err != nil {
		return nil, err
	}
	c := &etcdCluster{bin: bin}
	var initial []string
	for i := range n {
		ports, err := envtest.FreePorts(2)
		if err != nil {
			c.close()
			return nil, err
		}
		cport, pport := ports[0], ports[1]
		px, err := proxytest.New(net.JoinHostPort("127.0.0.1", strconv.Itoa(pport)))
		if err != nil {
			c.close()
			return nil, err
		}
		m := &etcdMember{name: fmt.Sprintf("m%d", i+1), dir: filepath.Join(dir, fmt.Sprintf("etcd-m%d", i+1)),
			client: net.JoinHostPort("127.0.0.1", strconv.Itoa(cport)), peer: px}
		m.args = []string{"--name", m.name, "--data-dir", filepath.Join(m.dir, "data"),
			"--listen-client-urls", "http://" + m.client, "--advertise-client-urls", "http://" + m.client,
			"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", pport), "--initial-advertise-peer-urls", "http://" + px.Addr(),
			"--initial-cluster-token", "baton-e2e", "--initial-cluster-state", "new",
			"--heartbeat-interval", "100", "--election-timeout", "1000", "--log-level", "warn",
			"--unsafe-no-fsync"}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"=http://"+px.Addr())
	}
	for _, m := range c.members {
		m.args = append(m.args, "--initial-cluster", strings.Join(initial, ","))
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			c.close()
			return nil, err
		}
		if err := m.start(bin); err != nil {
			c.close()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.waitHealthy(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (m *etcdMember) start(bin string) error {
	logf, err := os.OpenFile(filepath.Join(m.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcd %s: %w", m.name, err)
	}
	exited := make(chan struct{})
	go func() { // owned by the member: kill and stop wait for it
		_ = cmd.Wait()
		close(exited)
	}()
	m.mu.Lock()
	m.cmd, m.exited = cmd, exited
	m.mu.Unlock()
	return nil
}

func (m *etcdMember) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.exited == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

func (m *etcdMember) signal(sig syscall.Signal) error {
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	if cmd == nil {
		return errors.New("not started")
	}
	return cmd.Process.Signal(sig)
}

// kill sends SIGKILL (after SIGCONT, in case it is stopped) and waits.
func (m *etcdMember) kill() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-exited
}

// stop sends SIGTERM and waits up to 10 s, then kills.
func (m *etcdMember) stop() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	envtest.Terminate(cmd.Process, exited, 10*time.Second)
}

// status asks member m alone for its status.
func (m *etcdMember) status(ctx context.Context) (*clientv3.StatusResponse, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + m.client}, DialTimeout: 2 * time.Second,
		Logger: nopZap})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, "http://"+m.client)
	if err == nil {
		m.mu.Lock()
		m.id = st.Header.MemberId
		m.mu.Unlock()
	}
	return st, err
}

// leader returns the member that leads, as the running members see it.
func (c *etcdCluster) leader(ctx context.Context) (*etcdMember, error) {
	var last error
	for _, m := range c.members {
		if !m.running() {
			continue
		}
		st, err := m.status(ctx)
		if err != nil {
			last = err
			continue
		}
		if st.Leader == 0 {
			last = fmt.Errorf("%s sees no leader", m.name)
			continue
		}
		for _, o := range c.members {
			if o.memberID(ctx) == st.Leader {
				return o, nil
			}
		}
		last = fmt.Errorf("leader %x is not a known member", st.Leader)
	}
	if last == nil {
		last = errors.New("no member running")
	}
	return nil, last
}

func (m *etcdMember) memberID(ctx context.Context) uint64 {
	m.mu.Lock()
	id := m.id
	m.mu.Unlock()
	if id == 0 && m.running() {
		if st, err := m.status(ctx); err == nil {
			return st.Header.MemberId
		}
	}
	return id
}

// waitHealthy waits until every member answers and all see the same
// leader.
func (c *etcdCluster) waitHealthy(ctx context.Context) error {
	var last error
	for {
		var lead uint64
		ok := true
		for _, m := range c.members {
			st, err := m.status(ctx)
			if err != nil || st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				ok, last = false, fmt.Errorf("%s: leader %v, %v", m.name, st != nil && st.Leader != 0, err)
				break
			}
			lead = st.Leader
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd cluster not healthy: %w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *etcdCluster) close() {
	for _, m := range c.members {
		m.kill()
		if m.peer != nil {
			m.peer.Close()
		}
	}
}

func (c *etcdCluster) clientAddrs() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.client
	}
	return out
}

// pick returns a member at random among those for which ok holds.
func pick[T any](sc *scenario, xs []T, ok func(T) bool) (T, bool) {
	var cand []T
	for _, x := range xs {
		if ok(x) {
			cand = append(cand, x)
		}
	}
	var zero T
	if len(cand) == 0 {
		return zero, false
	}
	return cand[sc.rng.IntN(len(cand))], true
}

// Faults of the clustered etcd.
const (
	fEtcdKillLeader = "etcd-kill-leader" // SIGKILL of the leading member, started again 1-3 s later
	fEtcdStopLeader = "etcd-stop-leader" // SIGSTOP of the leading member for 0.5-3 s (its election timeout is 1 s)
	fEtcdPartition  = "etcd-partition"   // one member's peer listener blackholed for 2-6 s
	fEtcdMoveLeader = "etcd-move-leader" // MoveLeader to another member
)

// newEtcdCluster is the clustered etcd backend: 3 member processes, every
// node talking to all three, each through a proxy of its own.
func newEtcdCluster(dir string) (*backend, error) {
	c, err := startEtcdCluster(dir, 3)
	if err != nil {
		return nil, err
	}
	ttl := 3 * time.Second
	be := &backend{
		name: "etcd-cluster", topology: "3 etcd member processes (.bin/etcd), each node reaching all three through a proxy each", nodes: 4, ttl: ttl, grace: 30 * time.Second,
		targets: func(int) []string { return c.clientAddrs() },
		// A crash failover takes the TTL and a second on etcd; a node
		// cut off from one member moves to another within its dial
		// timeout, inside that second.
		crashBound: ttl + time.Second, handoverBound: time.Second + reconnectAllowance,
		args: func(addrs []string) []string {
			eps := make([]string, len(addrs))
			for i, a := range addrs {
				eps[i] = "http://" + a
			}
			return []string{"--backend", "etcd", "--endpoints", strings.Join(eps, ",")}
		},
		restart:     c.rollingRestart,
		restartKind: "rolling restart: each member stopped with SIGTERM and started again on its data dir, one after another, the cluster healthy between",
		close:       c.close,
	}
	be.faults = []backendFault{
		{fEtcdKillLeader, func(ctx context.Context, sc *scenario, kind string) error {
			m, err := c.leader(ctx)
			if err != nil {
				return err
			}
			m.kill()
			sc.note(kind, m.name, "leading member SIGKILLed")
			sc.pause(time.Second, 3*time.Second)
			if err := m.start(c.bin); err != nil {
				return err
			}
			if err := c.waitHealthy(ctx); err != nil {
				return err
			}
			sc.note(kind+"-end", m.name, "started again; cluster healthy")
			return nil
		}},
		{fEtcdStopLeader, func(ctx context.Context, sc *scenario, kind string) error {
			m, err := c.leader(ctx)
			if err != nil {
				return err
			}
			d := time.Duration(500+sc.rng.IntN(2500)) * time.Millisecond
			_ = m.signal(syscall.SIGSTOP)
			sc.note(kind, m.name, "leading member SIGSTOPped for %v", d)
			time.Sleep(d)
			_ = m.signal(syscall.SIGCONT)
			if err := c.waitHealthy(ctx); err != nil {
				return err
			}
			sc.note(kind+"-end", m.name, "SIGCONT; cluster healthy")
			return nil
		}},
		{fEtcdPartition, func(ctx context.Context, sc *scenario, kind string) error {
			m, _ := pick(sc, c.members, func(*etcdMember) bool { return true })
			role := "follower"
			if l, err := c.leader(ctx); err == nil && l == m {
				role = "leader"
			}
			d := time.Duration(2000+sc.rng.IntN(4000)) * time.Millisecond
			m.peer.Blackhole()
			sc.note(kind, m.name, "%s member's peer listener blackholed for %v (what it sends and what is sent to it over connections its peers opened)", role, d)
			time.Sleep(d)
			m.peer.Heal()
			if err := c.waitHealthy(ctx); err != nil {
				return err
			}
			sc.note(kind+"-end", m.name, "healed; cluster healthy")
			return nil
		}},
		{fEtcdMoveLeader, func(ctx context.Context, sc *scenario, kind string) error {
			l, err := c.leader(ctx)
			if err != nil {
				return err
			}
			to, ok := pick(sc, c.members, func(m *etcdMember) bool { return m != l && m.running() })
			if !ok {
				return errors.New("no member to move the leadership to")
			}
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + l.client}, DialTimeout: 2 * time.Second, Logger: nopZap})
			if err != nil {
				return err
			}
			defer cli.Close()
			mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := cli.MoveLeader(mctx, to.memberID(ctx)); err != nil {
				return fmt.Errorf("move leader %s to %s: %w", l.name, to.name, err)
			}
			sc.note(kind, l.name, "leadership moved to %s", to.name)
			return nil
		}},
	}
	return be, nil
}

// rollingRestart stops and starts each member in turn, waiting for the
// cluster to be healthy before the next, as an upgrade does.
func (c *etcdCluster) rollingRestart(ctx context.Context) error {
	for _, m := range c.members {
		m.stop()
		if err := m.start(c.bin); err != nil {
			return err
		}
		if err := c.waitHealthy(ctx); err != nil {
			return err
		}
	}
	return nil
}
