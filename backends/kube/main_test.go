package kube_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/internal/kubetest"
)

// One etcd and kube-apiserver pair serves the package's tests; each
// election has Lease names of its own.
func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// server returns the package's API server, or skips (fails under
// BATON_TEST_REQUIRE=1) without one.
func server(t testing.TB) *kubetest.Server { return kubetest.Shared(t) }

// client returns a Client for the administrator's token, reaching the
// server at addr (host:port; empty: directly).
func client(t testing.TB, addr string) *kube.Client {
	t.Helper()
	s := server(t)
	url := s.URL
	if addr != "" {
		url = "https://" + addr
	}
	c, err := kube.NewClient(kube.ClientConfig{Server: url, Token: kubetest.Token, CAFile: s.CAFile, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// proxy puts a fault proxy between a client and the server.
func proxy(t testing.TB) *backendtest.Proxy {
	return backendtest.NewProxy(t, strings.TrimPrefix(server(t).URL, "https://"))
}

// leaseName returns a Lease name no other test uses.
func leaseName(t testing.TB) string {
	b := make([]byte, 4)
	rand.Read(b)
	n := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(n) > 40 {
		n = n[:40]
	}
	return strings.Trim(n, "-") + "-" + hex.EncodeToString(b)
}

func newBackend(t testing.TB, cfg kube.Config) *kube.Backend {
	t.Helper()
	if cfg.Client == nil {
		cfg.Client = client(t, "")
	}
	b, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
