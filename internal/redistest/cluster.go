package redistest

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/envtest"
)

// ClusterTimeout bounds StartCluster's wait for cluster_state:ok.
const ClusterTimeout = 30 * time.Second

// Cluster is a Redis Cluster of three primaries (no replicas) on
// loopback, each in a temporary directory of its own.
type Cluster struct {
	Nodes []*Server
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// StartCluster starts three nodes with --cluster-enabled, joins them with
// redis-cli --cluster create, waits until every node reports
// cluster_state:ok, and stops them when t ends. It skips t when
// redis-server or redis-cli is missing.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		envtest.Unavailable(t, "redis-cli not in PATH: %v", err)
	}
	c := &Cluster{}
	for range 3 {
		bus, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		c.Nodes = append(c.Nodes, StartWith(t, Options{Args: []string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", "2000"}}))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	deadline := time.Now().Add(ClusterTimeout)
	for _, n := range c.Nodes {
		for !strings.Contains(admin(t, n.Addr(), "CLUSTER", "INFO"), "cluster_state:ok") {
			if time.Now().After(deadline) {
				t.Fatalf("redistest: %s: no cluster_state:ok within %v: %s", n.Addr(), ClusterTimeout, admin(t, n.Addr(), "CLUSTER", "INFO"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// String lists the nodes, for logs.
func (c *Cluster) String() string { return fmt.Sprint(c.Addrs()) }
