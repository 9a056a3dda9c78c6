package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/execjob/killtest"
	"github.com/batonhq/baton/internal/faultproxy"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/testenv"
)

// On a lost lock (its holder cut off from the backend), the command, which
// traps SIGTERM and keeps working, is gone before the next holder's
// command starts: two real baton lock processes, the first behind a fault
// proxy that is blackholed while its command runs (issue 28, section 1).
func TestLock_LostCommandGoneBeforeNextHolder(t *testing.T) {
	backends := []struct {
		name  string
		start func(t *testing.T) (addr string, flags func(addr string) []string)
	}{
		{"etcd", func(t *testing.T) (string, func(string) []string) {
			srv := etcdtest.Start(t)
			return srv.Addr(), func(a string) []string { return []string{"--backend=etcd", "--endpoints=http://" + a} }
		}},
		{"redis", func(t *testing.T) (string, func(string) []string) {
			srv := redistest.Start(t)
			return srv.Addr(), func(a string) []string { return []string{"--backend=redis", "--redis-addr=" + a} }
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			addr, flags := b.start(t)
			var gaps []string
			for i := range 3 {
				t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) {
					gaps = append(gaps, lockLossTrial(t, addr, flags, fmt.Sprintf("lockloss-%s-%d", b.name, i)).Round(time.Millisecond).String())
				})
			}
			t.Logf("new start less the old command's last heartbeat, by trial: %s", strings.Join(gaps, ", "))
		})
	}
}

// lockProc is a running baton lock.
type lockProc struct {
	cmd    *exec.Cmd
	stderr testenv.Buffer
	exited chan error
}

func startLock(t *testing.T, env []string, args ...string) *lockProc {
	t.Helper()
	p := &lockProc{cmd: exec.Command(batonBinary(t), args...), exited: make(chan error, 1)}
	p.cmd.Env = env
	p.cmd.Stderr = &p.stderr
	p.cmd.WaitDelay = 2 * time.Second // a command killed with baton lock could hold stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			t.Errorf("baton lock still running 15 s after the trial: killed\n%s", &p.stderr)
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.exited
		}
	})
	return p
}

func lockLossTrial(t *testing.T, addr string, flags func(string) []string, name string) time.Duration {
	dir := t.TempDir()
	file, pids := filepath.Join(dir, "beats"), filepath.Join(dir, "pids")
	if err := os.Mkdir(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	env := append(os.Environ(), "F="+file, "P="+pids)
	args := func(a, id string) []string {
		return append(append([]string{"lock"}, flags(a)...), "--ttl=2s", "--id="+id, name, "--", "sh", "-c", killtest.Script)
	}
	old := startLock(t, env, args(proxy.Addr(), "old")...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("old baton lock's stderr:\n%s", &old.stderr)
		}
	})
	testenv.WaitFor(t, 20*time.Second, "the first holder's command to beat for 500 ms", func() bool {
		if !exists(file) {
			return false
		}
		for _, r := range killtest.Read(t, file) {
			if r.Beats && r.Last.Sub(r.First) >= 500*time.Millisecond {
				return true
			}
		}
		return false
	})
	recs := killtest.Read(t, file)
	if len(recs) != 1 {
		t.Fatalf("before the cut: commands of %d holders, want 1", len(recs))
	}
	var oldTok uint64
	for tok := range recs {
		oldTok = tok
	}
	next := startLock(t, env, args(addr, "next")...)
	// Cleanups run last first: this one before the locks are awaited.
	t.Cleanup(func() { proxy.Heal(); _ = os.WriteFile(filepath.Join(pids, "stop"), nil, 0o644) })
	time.Sleep(300 * time.Millisecond) // the next holder waits for the lock
	proxy.Blackhole()
	cut := time.Now()
	var nextTok uint64
	testenv.WaitFor(t, 30*time.Second, "the next holder's command to start", func() bool {
		for tok, r := range killtest.Read(t, file) {
			if tok > oldTok && r.Beats {
				nextTok = tok
				return true
			}
		}
		return false
	})
	if pid := recs[oldTok].PID; pid > 0 {
		testenv.WaitFor(t, 20*time.Second, "the end of the old command", func() bool { return !killtest.Alive(pid) })
	}
	time.Sleep(100 * time.Millisecond)
	recs = killtest.Read(t, file)
	gap := killtest.CheckHandover(t, recs, oldTok, nextTok)
	o, n := recs[oldTok], recs[nextTok]
	termed := "no SIGTERM"
	if !o.Term.IsZero() {
		termed = fmt.Sprintf("SIGTERM %v after the cut", o.Term.Sub(cut).Round(time.Millisecond))
	}
	t.Logf("old command (token %d): %s, last heartbeat %v after the cut; new command (token %d) first heartbeat %v after the cut: gap %v",
		oldTok, termed, o.Last.Sub(cut).Round(time.Millisecond), nextTok, n.First.Sub(cut).Round(time.Millisecond), gap.Round(time.Millisecond))
	_ = next
	return gap
}
