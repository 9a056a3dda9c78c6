package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/etcdtest"
)

// baton lock has no --election (NAME is the election), and --config reads
// the backend section of a config file, the command line over it.
func TestLock_ConfigAndNoElectionFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and a process")
	}
	_, errOut, code := runBaton(t, "lock", "-h")
	if code != 0 || strings.Contains(errOut, "-election") || !strings.Contains(errOut, "-config") {
		t.Errorf("baton lock -h: status %d; want --config and no --election listed:\n%s", code, errOut)
	}
	if _, errOut, code := runBaton(t, "lock", "--election", "x", "--endpoints=http://127.0.0.1:1", "--timeout=3s", "name", "--", "true"); code != 1 ||
		!strings.Contains(errOut, "flag provided but not defined: -election") {
		t.Errorf("baton lock --election: status %d, %s", code, errOut)
	}

	srv := etcdtest.Start(t)
	dir := t.TempDir()
	cfg := write(t, dir, "baton.yaml", fmt.Sprintf(`election:
  name: billing-jobs
backend:
  kind: etcd
  endpoints: [%s]
jobs:
  - {name: report, schedule: "@every 1m", http: {url: "http://127.0.0.1:1/"}}
`, srv.Endpoint()))
	out, errOut, code := runBaton(t, "lock", "--config", cfg, "--timeout=20s", "config-test", "--", "sh", "-c", `echo "token=$BATON_TOKEN"; exit 3`)
	if code != 3 || !strings.Contains(out, "token=") {
		t.Errorf("baton lock --config: status %d, want 3 (the command's)\n%s%s", code, out, errOut)
	}
	// A bad value in the file names the file, line and field.
	bad := write(t, dir, "bad.yaml", "backend:\n  kind: etcd\n  endpionts: [x]\njobs:\n  - {name: a, schedule: \"@every 1m\", http: {url: \"http://127.0.0.1:1/\"}}\n")
	if _, errOut, code := runBaton(t, "lock", "--config", bad, "n", "--", "true"); code != 1 ||
		!strings.Contains(errOut, bad+":3: backend.endpionts: unknown setting") {
		t.Errorf("baton lock --config bad.yaml: status %d, %s", code, errOut)
	}
}
