package etcd_test

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/proxytest"
)

// acquireWithin bounds the Acquire of a test that expects to lead at once
// or after a handover.
const acquireWithin = 10 * time.Second

// One embedded server serves every test of the package; each test uses
// prefixes of its own.
var (
	shared = envtest.Shared[*etcdtest.Server]{What: "embedded etcd", Dir: "baton-etcd-test-",
		Start: etcdtest.StartDir,
		Stop:  (*etcdtest.Server).Stop}
	seq atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

func server(t testing.TB) *etcdtest.Server { return shared.Get(t) }

// prefix returns an election prefix no other test uses.
func prefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/baton/test/%s-%d", name, seq.Add(1))
}

// dial returns a client of addr (host:port), closed when t ends.
func dial(t testing.TB, addr string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{"http://" + addr},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// proxied returns a client whose traffic goes through a fault proxy of its
// own. The proxy is closed after the client when t ends.
func proxied(t testing.TB) (*clientv3.Client, *proxytest.Proxy) {
	t.Helper()
	p, err := proxytest.New(server(t).Addr())
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return dial(t, p.Addr()), p
}

func newBackend(t testing.TB, cli *clientv3.Client, pfx string, ttl time.Duration) *etcd.Backend {
	t.Helper()
	b, err := etcd.New(etcd.Config{Client: cli, Prefix: pfx, Timing: election.Timing{TTL: ttl}})
	if err != nil {
		t.Fatalf("etcd.New: %v", err)
	}
	return b
}
