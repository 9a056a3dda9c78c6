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

// With the API server unreachable, baton run on the kube backend fails at
// start with the check's error, naming the Lease: its ledger and control
// store are there, so the run is not refused, but nothing runs until the
// server answers.
func TestRun_KubeServerDownFailsAtStart(t *testing.T) {
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
	if code != 1 || !strings.Contains(errOut, "kube Lease default/startup-test") || !strings.Contains(errOut, "kube: check:") {
		t.Errorf("baton run on kube with the server down: status %d, want 1 and the check's error:\n%s", code, errOut)
	}
}
