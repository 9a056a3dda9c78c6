package redis_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/proxytest"
	"github.com/batonhq/baton/internal/redistest"
)

// acquireWithin bounds the Acquire of a test that expects to lead at once
// or after a handover.
const acquireWithin = 10 * time.Second

// One redis-server serves every test of the package; each test uses
// elections of its own.
var (
	shared = envtest.Shared[*redistest.Server]{What: "redis-server", Dir: "baton-redis-test-",
		Start: func(dir string) (*redistest.Server, error) { return redistest.StartServer(dir, redistest.Options{}) },
		Stop:  (*redistest.Server).Stop}
	seq atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

func server(t testing.TB) *redistest.Server { return shared.Get(t) }

// electionName returns an election name no other test uses.
func electionName(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_", "#", "_").Replace(t.Name())
	return fmt.Sprintf("test-%s-%d", name, seq.Add(1))
}

// proxy returns a fault proxy to the shared server, closed when t ends.
func proxy(t testing.TB) *proxytest.Proxy {
	t.Helper()
	p, err := proxytest.New(server(t).Addr())
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// newBackend returns a Backend of election e at addr, closed when t ends
// (after the cleanups registered later, such as lease releases).
func newBackend(t testing.TB, cfg redis.Config) *redis.Backend {
	t.Helper()
	if cfg.Addr == "" && cfg.SentinelAddrs == nil && cfg.ClusterAddrs == nil {
		cfg.Addr = server(t).Addr()
	}
	b, err := redis.New(cfg)
	if err != nil {
		t.Fatalf("redis.New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// admin returns a plain client of the shared server, closed when t ends.
func admin(t testing.TB) *goredis.Client {
	t.Helper()
	cli := goredis.NewClient(&goredis.Options{Addr: server(t).Addr(), DisableIdentity: true})
	t.Cleanup(func() { cli.Close() })
	return cli
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var _ = election.Timing{}
