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

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backends/consul/consultest"
	"github.com/batonhq/baton/internal/faultproxy"
	"github.com/batonhq/baton/internal/testenv"
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
		testenv.Unavailable(t, "%v", err)
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
	proxy *faultproxy.Proxy
}

func newCandidate(t testing.TB, a *consultest.Agent, key string) candidate {
	t.Helper()
	p, err := faultproxy.New(a.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := a.Client(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	b, err := consul.New(consul.Config{Client: c, Key: key, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return candidate{Backend: b, proxy: p}
}
