package main

import (
	"fmt"
	"strings"
	"testing"
)

// With Redis down, `baton run` prints its own error only: go-redis's raw
// pool lines ("redis: 2026/11/26 18:39:56 pool.go:...") do not come
// before it.
func TestRun_RedisDownPrintsOneError(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, dir, "baton.yaml", fmt.Sprintf(`election:
  name: startup-test
backend:
  kind: redis
  redis_addr: %s
node:
  http: ""
jobs:
  - {name: a, schedule: "@every 1m", http: {url: "http://127.0.0.1:1/"}}
`, freeAddr(t)))
	_, errOut, code := runBaton(t, "run", "--config", cfg)
	if code != 1 || !strings.HasPrefix(errOut, "baton run: redis key ") || strings.Contains(errOut, "pool.go") {
		t.Errorf("baton run with Redis down: status %d, want 1 and baton's error alone:\n%s", code, errOut)
	}
}

// The kube backend has no tick ledger yet: baton run refuses it at start,
// naming the backend and what works, instead of running jobs without the
// once-per-tick guarantee.
func TestRun_KubeRefusedWithoutLedger(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, dir, "baton.yaml", `election:
  name: startup-test
backend:
  kind: kube
  kube_server: https://127.0.0.1:1
jobs:
  - {name: a, schedule: "@every 1m", command: "true"}
`)
	_, errOut, code := runBaton(t, "run", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "--backend kube: keeps no tick ledger yet") || !strings.Contains(errOut, "baton lock") {
		t.Errorf("baton run on kube: status %d, want 1 and the refusal:\n%s", code, errOut)
	}
}
