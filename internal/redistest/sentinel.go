package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/proxytest"
)

// Sentinels is a primary, one replica and three Sentinels on loopback,
// with a fault proxy in front of the primary: the replica replicates
// through it and the Sentinels monitor the primary through it, so
// Proxy.Blackhole cuts the primary off from both (a client may still
// reach the primary directly, at Primary.Addr()). The primary announces
// the proxy's port when it becomes a replica, so the Sentinels know it by
// one address throughout.
type Sentinels struct {
	Master    string // the name the Sentinels monitor
	Primary   *Server
	Replica   *Server
	Proxy     *proxytest.Proxy // in front of Primary
	Sentinels []*Server
}

// Addrs are the Sentinels' addresses.
func (s *Sentinels) Addrs() []string {
	var out []string
	for _, x := range s.Sentinels {
		out = append(out, x.Addr())
	}
	return out
}

// SentinelTimeout bounds StartSentinels' wait for the Sentinels to know
// the replica and each other.
const SentinelTimeout = 30 * time.Second

// StartSentinels starts the set, waits until the replica is in sync and
// every Sentinel knows the replica and the two other Sentinels, and stops
// everything when t ends. down-after-milliseconds is 1000 and
// failover-timeout 3000. It skips t when redis-server is missing.
func StartSentinels(t testing.TB, master string) *Sentinels {
	t.Helper()
	s := &Sentinels{Master: master}
	fast := []string{"--repl-diskless-sync-delay", "0"} // a sync starts at once
	s.Primary = StartWith(t, Options{Args: fast})
	p, err := proxytest.New(s.Primary.Addr())
	if err != nil {
		t.Fatalf("redistest: proxy: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	s.Proxy = p
	_, pport, _ := net.SplitHostPort(p.Addr())
	admin(t, s.Primary.Addr(), "CONFIG", "SET", "replica-announce-ip", "127.0.0.1", "replica-announce-port", pport)
	s.Replica = StartWith(t, Options{Args: append(fast, "--replicaof", "127.0.0.1", pport)})
	for i := range 3 {
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s 2\nsentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 3000\nsentinel parallel-syncs %[1]s 1\n", master, pport)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		x, err := StartServer(dir, Options{ConfigFile: conf, Sentinel: true})
		if err != nil {
			t.Fatalf("redistest: sentinel %d: %v", i, err)
		}
		t.Cleanup(x.Stop)
		s.Sentinels = append(s.Sentinels, x)
	}
	deadline := time.Now().Add(SentinelTimeout)
	for !s.ready(t) {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: Sentinels not ready within %v:\n%s", SentinelTimeout, s.Sentinels[0].Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s
}

// ready reports whether the replica is in sync and each Sentinel knows
// one replica and two other Sentinels.
func (s *Sentinels) ready(t testing.TB) bool {
	info := admin(t, s.Replica.Addr(), "INFO", "replication")
	if !strings.Contains(info, "master_link_status:up") {
		return false
	}
	for _, x := range s.Sentinels {
		m := admin(t, x.Addr(), "SENTINEL", "MASTER", s.Master)
		if !strings.Contains(m, "num-slaves 1 ") || !strings.Contains(m, "num-other-sentinels 2 ") {
			return false
		}
	}
	return true
}

// PrimaryAddr is the primary's address by the first Sentinel that
// answers.
func (s *Sentinels) PrimaryAddr(t testing.TB) string {
	for _, x := range s.Sentinels {
		cli := goredis.NewSentinelClient(&goredis.Options{Addr: x.Addr(), DisableIdentity: true})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a, err := cli.GetMasterAddrByName(ctx, s.Master).Result()
		cancel()
		cli.Close()
		if err == nil && len(a) == 2 {
			return net.JoinHostPort(a[0], a[1])
		}
	}
	return ""
}

// Role is the first line of ROLE of the server at addr ("master",
// "slave"), or the error.
func Role(t testing.TB, addr string) string {
	return strings.SplitN(admin(t, addr, "ROLE"), " ", 2)[0]
}

// Do sends one command to the server at addr and returns its answer as
// text, or the error's text.
func Do(t testing.TB, addr string, args ...any) string { return admin(t, addr, args...) }

// admin sends one command to addr and returns its answer as text, or the
// error's text.
func admin(t testing.TB, addr string, args ...any) string {
	cli := goredis.NewClient(&goredis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1})
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := cli.Do(ctx, args...).Result()
	if err != nil {
		return "error: " + err.Error()
	}
	return flat(v)
}

func flat(v any) string {
	switch x := v.(type) {
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, flat(e))
		}
		return strings.Join(parts, " ") + " "
	case map[any]any:
		var parts []string
		for k, e := range x {
			parts = append(parts, flat(k)+" "+flat(e))
		}
		return strings.Join(parts, " ") + " "
	}
	return fmt.Sprint(v)
}
