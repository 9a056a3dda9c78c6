package consul_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/proxytest"
)

// One dev agent serves every test of the package.
var (
	agentOnce sync.Once
	agent     *consultest.Agent
	agentErr  error
	keySeq    atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if agent != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "consul agent log (%s), tail:\n%s\n", agent.LogPath, agent.LogTail(8192))
		}
		agent.Close()
	}
	os.Exit(code)
}

// sharedAgent returns the package's agent, starting it on first use. It
// skips t loudly (or fails it under BATON_TEST_REQUIRE=1) without a consul
// binary.
func sharedAgent(t testing.TB) *consultest.Agent {
	t.Helper()
	if _, err := consultest.Binary(); err != nil {
		envtest.Unavailable(t, "%v", err)
	}
	agentOnce.Do(func() {
		start := time.Now()
		agent, agentErr = consultest.Start(context.Background(), consultest.Options{})
		if agentErr == nil {
			t.Logf("consul dev agent on %s ready in %v (%s)", agent.HTTPAddr, time.Since(start).Round(time.Millisecond), agent.Binary)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agent
}

// testLogger logs at the level in BATON_TEST_LOG (debug, info, warn);
// errors only by default.
func testLogger() *slog.Logger {
	level := slog.LevelError
	switch os.Getenv("BATON_TEST_LOG") {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn":
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// newKey returns a lock key no other test uses.
func newKey(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("baton-test/%s-%d/.lock", name, keySeq.Add(1))
}

// defaultLockDelay is Config.LockDelay's default at the default TTL: the
// TTL. The tests use the defaults; a LockDelay short enough to make
// failovers quick would be unsafe, and Validate rejects it.
const defaultLockDelay = consul.DefaultTTL

// candidate is a Backend with its own path to the agent through a fault
// proxy.
type candidate struct {
	*consul.Backend
	proxy *proxytest.Proxy
}

func newCandidate(t testing.TB, a *consultest.Agent, key string) candidate {
	t.Helper()
	p := proxyTo(t, a)
	return candidate{Backend: backendOn(t, agentClient(t, a, p.Addr(), ""), key, nil), proxy: p}
}

// proxyTo returns a fault proxy in front of agent a, closed when t ends.
func proxyTo(t testing.TB, a *consultest.Agent) *proxytest.Proxy {
	t.Helper()
	p, err := proxytest.New(a.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// agentClient returns a client of agent a reached at addr ("" for the
// agent's own address) sending the ACL token token ("" for none).
func agentClient(t testing.TB, a *consultest.Agent, addr, token string) *api.Client {
	t.Helper()
	c, err := a.ClientWithToken(addr, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// backendOn returns a Backend of the election on key that talks through
// c and logs with testLogger. adjust, if not nil, changes the Config
// first.
func backendOn(t testing.TB, c *api.Client, key string, adjust func(*consul.Config)) *consul.Backend {
	t.Helper()
	cfg := consul.Config{Client: c, Key: key, Logger: testLogger()}
	if adjust != nil {
		adjust(&cfg)
	}
	b, err := consul.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
