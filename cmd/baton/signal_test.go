package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/execjob"
	"github.com/batonhq/baton/internal/execjob/killtest"
)

// secondSignalJob leaves a setsid child and a double-forked daemon, both
// ignoring SIGTERM, and ignores SIGTERM itself: the drain would wait for
// it until shutdown_timeout.
const secondSignalJob = `esc='trap "" TERM HUP INT; while :; do sleep 0.05; done'
setsid sh -c "$esc" </dev/null >/dev/null 2>&1 &
(setsid sh -c 'sh -c "$1" & exit 0' sh "$esc" </dev/null >/dev/null 2>&1 &)
trap '' TERM
while :; do sleep 0.05; done`

// A second SIGTERM during a long drain makes `baton run` exit at once with
// status 2, and every process of its runs, in the job's process group or
// not, is gone by the time it has exited (issue 50, sections 2 and 3).
func TestRun_SecondSignalKillsEveryRunProcessFirst(t *testing.T) {
	srv := etcdtest.Start(t)
	for _, mode := range []string{"cgroup", "fallback"} {
		t.Run(mode, func(t *testing.T) {
			if _, err := execjob.CgroupSupport(); mode == "cgroup" && err != nil {
				t.Skipf("no cgroup per run here: %v", err)
			}
			for trial := range 3 {
				secondSignalTrial(t, srv.Endpoint(), mode, trial)
			}
		})
	}
}

func secondSignalTrial(t *testing.T, endpoint, mode string, trial int) {
	dir := t.TempDir()
	indented := "      " + strings.ReplaceAll(secondSignalJob, "\n", "\n      ")
	cfg := write(t, dir, "baton.yaml", fmt.Sprintf(`election:
  name: second-signal-%s-%d
  shutdown_timeout: 1m
backend:
  kind: etcd
  endpoints: [%s]
node:
  http: ""
jobs:
  - name: stubborn
    schedule: "@every 1s"
    command: |
%s
`, mode, trial, endpoint, indented))
	mark := "BATON_TEST_RUN=" + strconv.Itoa(os.Getpid()) + "-" + mode + "-" + strconv.Itoa(trial)
	cmd := exec.Command(batonBinary(t), "run", "--config", cfg)
	cmd.Env = append(os.Environ(), mark, execjob.EnvCgroups+"=on")
	if mode == "fallback" {
		cmd.Env = append(os.Environ(), mark, execjob.EnvCgroups+"=off")
	}
	var logs envtest.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, gone := make(chan error, 1), false
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if !gone {
			envtest.Terminate(cmd.Process, exited, 5*time.Second)
		}
		for _, p := range killtest.Survivors(t, mark) {
			pid, _ := strconv.Atoi(strings.Fields(p)[0])
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("baton run's output:\n%s", &logs)
		}
	}()
	envtest.WaitFor(t, 30*time.Second, "the job and its two escaped processes", func() bool {
		return len(killtest.Survivors(t, mark)) >= 3
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	envtest.WaitFor(t, 10*time.Second, "the drain", func() bool { return strings.Contains(logs.String(), "draining") })
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-exited:
		gone = true
	case <-time.After(10 * time.Second):
		t.Fatalf("trial %d: baton run still running 10 s after the second SIGTERM", trial)
	}
	left := killtest.Survivors(t, mark)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("trial %d: baton run exited with %v, want status 2", trial, err)
	}
	if len(left) > 0 {
		t.Fatalf("trial %d: processes of the run alive when baton run had exited: %v", trial, left)
	}
	t.Logf("trial %d: exit status 2, no process of the run left; %s", trial, lastLine(logs.String(), "second signal"))
}

// lastLine is the last line of s that holds sub.
func lastLine(s, sub string) string {
	out := ""
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = l
		}
	}
	return out
}
