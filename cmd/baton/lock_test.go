package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/testenv"
)

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// waitUntil polls cond every 20 ms for up to d.
func waitUntil(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// The command's exit status is baton lock's, a death by signal N as
// 128+N; the command sees the fencing token.
func TestLock_ExitStatus(t *testing.T) {
	srv := etcdtest.Start(t)
	ep := "--endpoints=" + srv.Endpoint()
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	_, errOut, code := runBaton(t, "lock", ep, "status-test", "--", "sh", "-c", `echo "$BATON_TOKEN" > `+tok+`; exit 7`)
	if code != 7 {
		t.Errorf("exit 7: baton lock exited %d: %s", code, errOut)
	}
	raw, _ := os.ReadFile(tok)
	if n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64); err != nil || n == 0 {
		t.Errorf("BATON_TOKEN = %q, want a fencing token", raw)
	}
	if _, errOut, code := runBaton(t, "lock", ep, "status-test", "--", "sh", "-c", "kill -KILL $$"); code != 128+9 {
		t.Errorf("killed by SIGKILL: baton lock exited %d, want 137: %s", code, errOut)
	}
	if _, _, code := runBaton(t, "lock", ep, "status-test", "--", "true"); code != 0 {
		t.Errorf("true: baton lock exited %d", code)
	}
	if _, errOut, code := runBaton(t, "lock", ep, "status-test"); code != 1 || !strings.Contains(errOut, "no command") {
		t.Errorf("no command: %d %s", code, errOut)
	}
}

// On loss of the lock by the backend's word (its lease revoked behind its
// back), another holder may have it already: the command gets SIGKILL at
// once, not SIGTERM and --kill-grace.
func TestLock_RevokedKilledAtOnce(t *testing.T) {
	srv := etcdtest.Start(t)
	dir := t.TempDir()
	started, termed := filepath.Join(dir, "started"), filepath.Join(dir, "termed")
	script := `trap 'echo TERM >> ` + termed + `' TERM; touch ` + started + `; while :; do sleep 0.1; done`
	cmd := exec.Command(batonBinary(t), "lock", "--endpoints="+srv.Endpoint(), "--ttl=2s", "--kill-grace=1s", "loss-test", "--", "sh", "-c", script)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	gone := false
	defer func() {
		if !gone {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	testenv.WaitFor(t, 20*time.Second, "the command to start", func() bool { return exists(started) })

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "loss-test/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the lock's key: %v, %d keys", err, len(resp.Kvs))
	}
	revoked := time.Now()
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	var took time.Duration
	select {
	case <-exited:
		gone = true
		took = time.Since(revoked)
	case <-time.After(20 * time.Second):
		t.Fatal("baton lock still running 20 s after its lease was revoked")
	}
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Exited() {
		code = ws.ExitStatus()
	}
	if code != 128+9 {
		t.Errorf("exit status %d, want 137 (the command was SIGKILLed)", code)
	}
	if exists(termed) {
		t.Error("the command got SIGTERM: the lease was gone, SIGKILL was due at once")
	}
	if s := stderr.String(); !strings.Contains(s, "lock lost") || !strings.Contains(s, "SIGKILL to the command at once") {
		t.Errorf("stderr does not say the lock was lost and the command killed at once:\n%s", s)
	}
	t.Logf("lease revoked; baton lock exited %v later with status %d", took.Round(time.Millisecond), code)
}

// interop checks mutual exclusion between baton lock and another lock
// tool on one name, both ways. other(name, file) returns the command of
// the other tool that creates file while holding the lock and then holds
// it for a minute; otherTry(name, file) one that creates file only if it
// gets the lock within a few seconds.
func interop(t *testing.T, batonArgs []string, other, otherTry func(name, file string) *exec.Cmd) {
	dir := t.TempDir()
	name := "interop-lock"
	mark := func(s string) string { return filepath.Join(dir, s) }

	// 1. The other tool holds the lock: baton lock waits and gives up.
	holder := other(name, mark("held"))
	var holderOut strings.Builder
	holder.Stdout, holder.Stderr = &holderOut, &holderOut
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // SIGINT goes to it and to its command, as Ctrl-C would
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- holder.Wait() }()
	holderDone := false
	defer func() {
		if !holderDone {
			_ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}()
	if !waitUntil(30*time.Second, func() bool { return exists(mark("held")) }) {
		_ = holder.Process.Kill()
		<-done
		holderDone = true
		t.Fatalf("the other tool did not hold the lock within 30 s: %v\n%s", holder.Args, holderOut.String())
	}
	args := append(append([]string{"lock"}, batonArgs...), "--timeout=3s", name, "--", "touch", mark("baton-ran"))
	if _, errOut, code := runBaton(t, args...); code != 1 || exists(mark("baton-ran")) || !strings.Contains(errOut, "not held within --timeout 3s") {
		t.Errorf("baton lock while the other tool holds: status %d, ran %v: %s", code, exists(mark("baton-ran")), errOut)
	}
	_ = syscall.Kill(-holder.Process.Pid, syscall.SIGINT)
	select {
	case <-done:
		holderDone = true
	case <-time.After(15 * time.Second):
		t.Fatal("the other tool did not exit within 15 s of SIGINT")
	}
	args = append(append([]string{"lock"}, batonArgs...), "--timeout=15s", name, "--", "touch", mark("baton-ran"))
	if _, errOut, code := runBaton(t, args...); code != 0 || !exists(mark("baton-ran")) {
		t.Errorf("baton lock after the other tool released: status %d: %s", code, errOut)
	}

	// 2. baton lock holds: the other tool does not get it; after baton
	// lock ends, it does.
	args = append(append([]string{"lock"}, batonArgs...), name, "--", "sh", "-c", "touch "+mark("baton-held")+"; sleep 60")
	b := exec.Command(batonBinary(t), args...)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	bdone := make(chan error, 1)
	go func() { bdone <- b.Wait() }()
	bDone := false
	defer func() {
		if !bDone {
			_ = b.Process.Kill()
			<-bdone
		}
	}()
	testenv.WaitFor(t, 30*time.Second, "baton lock to hold the lock", func() bool { return exists(mark("baton-held")) })
	out, _ := otherTry(name, mark("other-ran")).CombinedOutput()
	if exists(mark("other-ran")) {
		t.Errorf("the other tool ran its command while baton lock held the lock:\n%s", out)
	}
	_ = b.Process.Signal(syscall.SIGTERM) // forwarded to the command; the lease is released when it exits
	select {
	case <-bdone:
		bDone = true
	case <-time.After(15 * time.Second):
		t.Fatal("baton lock did not exit within 15 s of SIGTERM")
	}
	if code := b.ProcessState.ExitCode(); code != 128+15 {
		t.Errorf("baton lock after SIGTERM: status %d, want 143 (its command's)", code)
	}
	out, _ = otherTry(name, mark("other-ran")).CombinedOutput()
	if !exists(mark("other-ran")) {
		t.Errorf("the other tool did not get the lock after baton lock released it:\n%s", out)
	}
}

// etcdctlPath is the pinned etcdctl (make tools).
func etcdctlPath(t *testing.T) string {
	p, err := filepath.Abs(filepath.Join("..", "..", ".bin", "etcdctl"))
	if err != nil || !exists(p) {
		testenv.Unavailable(t, "%s: run make tools", p)
	}
	return p
}

// baton lock NAME and etcdctl lock NAME exclude each other.
func TestLock_EtcdctlInterop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and processes")
	}
	etcdctl := etcdctlPath(t)
	srv := etcdtest.Start(t)
	ep := "--endpoints=" + srv.Endpoint()
	interop(t, []string{"--backend=etcd", ep},
		func(name, file string) *exec.Cmd {
			return exec.Command(etcdctl, ep, "lock", name, "--", "sh", "-c", "touch "+file+"; sleep 60")
		},
		func(name, file string) *exec.Cmd {
			// etcdctl lock waits without a bound: give it 3 s.
			return exec.Command("timeout", "3", etcdctl, ep, "lock", name, "touch", file)
		})
}

// baton lock NAME and consul lock NAME exclude each other.
func TestLock_ConsulInterop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Consul and processes")
	}
	a := consultest.StartT(t)
	addr := "-http-addr=http://" + a.HTTPAddr
	interop(t, []string{"--backend=consul", "--consul-addr=" + a.HTTPAddr},
		func(name, file string) *exec.Cmd {
			return exec.Command(a.Binary, "lock", addr, name, "touch "+file+"; sleep 60")
		},
		func(name, file string) *exec.Cmd {
			return exec.Command(a.Binary, "lock", addr, "-timeout=3s", name, "touch "+file)
		})
}

// SIGKILL of baton lock itself (a crash, the OOM killer) must take its
// command along: the lease expires and the next holder's command starts,
// and the old one, which traps SIGTERM and started a child, would run
// beside it.
func TestLock_KilledTakesItsCommand(t *testing.T) {
	srv := etcdtest.Start(t)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	for trial := 1; trial <= 3; trial++ {
		_ = os.Remove(pids)
		p := startLock(t, os.Environ(), "lock", "--endpoints="+srv.Endpoint(), "--ttl=2s", "killed-holder", "--",
			"sh", "-c", `trap '' TERM; sleep 600 & echo "$$ $!" > `+pids+`.tmp && mv `+pids+`.tmp `+pids+`; while :; do sleep 0.05; done`)
		var procs []int
		if !waitUntil(20*time.Second, func() bool {
			b, err := os.ReadFile(pids)
			if err != nil {
				return false
			}
			for _, f := range strings.Fields(string(b)) {
				n, _ := strconv.Atoi(f)
				procs = append(procs, n)
			}
			return true
		}) || len(procs) != 2 {
			t.Fatalf("trial %d: the command did not write its pids:\n%s", trial, &p.stderr)
		}
		killed := time.Now()
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		p.exited <- nil // for the cleanup
		gone := waitUntil(2*time.Second, func() bool { return !alive(procs[0]) && !alive(procs[1]) })
		for _, n := range procs {
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
		if !gone {
			t.Fatalf("trial %d: the command's processes %v still run 2s after baton lock was killed", trial, procs)
		}
		t.Logf("trial %d: the command's processes were gone %v after baton lock was killed", trial, time.Since(killed).Round(time.Millisecond))
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndex(s, ")")
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}
