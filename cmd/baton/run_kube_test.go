package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
)

// baton run on the kube backend, as real processes on a real
// kube-apiserver: one of two instances leads and runs a command job every
// second, with its term's token; on SIGTERM it drains and releases, and
// the other leads with a higher token at once. No tick runs twice, and
// the Lease names the holder.
func TestRun_Kube(t *testing.T) {
	srv, dir, tokenFile := kubeServer(t)
	runs := filepath.Join(dir, "runs")
	cfg := write(t, dir, "baton.yaml", fmt.Sprintf(`election:
  name: kube-run-test
  ttl: 3s
  shutdown_timeout: 5s
backend:
  kind: kube
  kube_server: %s
  kube_token_file: %s
  kube_cacert: %s
node:
  http: ""
jobs:
  - name: tick
    schedule: "@every 1s"
    command: 'echo "$BATON_TICK $BATON_TOKEN $BATON_INSTANCE" >> %s'
`, srv.URL, tokenFile, srv.CAFile, runs))
	start := func(id string) *exec.Cmd {
		var logs testenv.Buffer
		cmd := exec.Command(batonBinary(t), "run", "--config", cfg, "--id", id)
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("%s's log:\n%s", id, logs.String())
			}
		})
		return cmd
	}
	read := func() (ticks map[string]int, tokens map[string]uint64) {
		ticks, tokens = map[string]int{}, map[string]uint64{}
		raw, _ := os.ReadFile(runs)
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			f := strings.Fields(l)
			if len(f) != 3 {
				continue
			}
			ticks[f[0]]++
			tok, _ := strconv.ParseUint(f[1], 10, 64)
			tokens[f[2]] = max(tokens[f[2]], tok)
		}
		return ticks, tokens
	}
	a := start("run-a")
	if !waitUntil(20*time.Second, func() bool { _, tok := read(); return tok["run-a"] > 0 }) {
		t.Fatal("run-a never ran the job")
	}
	if who := leaseHolder(t, srv, "kube-run-test"); who != "run-a" {
		t.Errorf("the Lease's holderIdentity is %q, want run-a", who)
	}
	b := start("run-b")
	time.Sleep(2 * time.Second) // b follows; a runs on
	a.Process.Signal(syscall.SIGTERM)
	if err := a.Wait(); err != nil {
		t.Errorf("run-a after SIGTERM: %v, want a clean exit", err)
	}
	if !waitUntil(10*time.Second, func() bool { _, tok := read(); return tok["run-b"] > 0 }) {
		t.Fatal("run-b never ran the job after run-a stopped")
	}
	time.Sleep(2 * time.Second)
	b.Process.Signal(syscall.SIGTERM)
	b.Wait()
	ticks, tokens := read()
	for tick, n := range ticks {
		if n > 1 {
			t.Errorf("tick %s ran %d times", tick, n)
		}
	}
	if tokens["run-b"] <= tokens["run-a"] {
		t.Errorf("tokens: run-a %d, then run-b %d: not rising", tokens["run-a"], tokens["run-b"])
	}
	t.Logf("%d ticks run, tokens %v", len(ticks), tokens)
}
