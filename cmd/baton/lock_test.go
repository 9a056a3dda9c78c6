package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/execjob"
	"github.com/batonhq/baton/internal/execjob/killtest"
	"github.com/batonhq/baton/internal/kubetest"
	"github.com/batonhq/baton/internal/proxytest"
	"github.com/batonhq/baton/internal/redistest"
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
	envtest.WaitFor(t, 20*time.Second, "the command to start", func() bool { return exists(started) })

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
	envtest.WaitFor(t, 30*time.Second, "baton lock to hold the lock", func() bool { return exists(mark("baton-held")) })
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
		envtest.Unavailable(t, "%s: run make tools", p)
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
					gaps = append(gaps, lockLossTrial(t, addr, flags, fmt.Sprintf("lockloss-%s-%d", b.name, i), killtest.Script).Round(time.Millisecond).String())
				})
			}
			t.Logf("new start less the old command's last heartbeat, by trial: %s", strings.Join(gaps, ", "))
		})
	}
}

// On a lost lock, what the command started in a session of its own
// (setsid, a double fork) is gone too before the next holder's command
// starts: in a cgroup of the run's where the machine allows one, else
// by the fallback (the subreaper and a search of /proc), forced here with
// BATON_CGROUPS=off (issue 50, section 2).
func TestLock_LostEscapedGoneBeforeNextHolder(t *testing.T) {
	backends := map[string]func(t *testing.T) (string, func(string) []string){
		"etcd": func(t *testing.T) (string, func(string) []string) {
			srv := etcdtest.Start(t)
			return srv.Addr(), func(a string) []string { return []string{"--backend=etcd", "--endpoints=http://" + a} }
		},
		"redis": func(t *testing.T) (string, func(string) []string) {
			srv := redistest.Start(t)
			return srv.Addr(), func(a string) []string { return []string{"--backend=redis", "--redis-addr=" + a} }
		},
	}
	for _, name := range []string{"etcd", "redis"} {
		t.Run(name, func(t *testing.T) {
			addr, flags := backends[name](t)
			for _, mode := range []string{"cgroup", "fallback"} {
				t.Run(mode, func(t *testing.T) {
					env := []string{"BATON_CGROUPS=on"}
					if mode == "fallback" {
						env = []string{"BATON_CGROUPS=off"}
					} else if _, err := execjob.CgroupSupport(); err != nil {
						t.Skipf("no cgroup per run here: %v", err)
					}
					// The command runs in a cgroup of its own, or not.
					t.Setenv("BATON_CGROUPS", strings.TrimPrefix(env[0], "BATON_CGROUPS="))
					out, errOut, code := runBaton(t, append(append([]string{"lock"}, flags(addr)...), "cg-"+name+"-"+mode, "--", "grep", "^0::", "/proc/self/cgroup")...)
					if code != 0 || strings.Contains(out, "/baton-") != (mode == "cgroup") {
						t.Errorf("baton lock's command ran in cgroup %q (status %d, %s); want one of its own: %v", out, code, errOut, mode == "cgroup")
					}
					var gaps []string
					for i := range 3 {
						t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) {
							lock := fmt.Sprintf("lockesc-%s-%s-%d", name, mode, i)
							gaps = append(gaps, lockLossTrial(t, addr, flags, lock, killtest.EscapeScript, env...).Round(time.Millisecond).String())
						})
					}
					t.Logf("new start less the old command's last heartbeat, by trial: %s", strings.Join(gaps, ", "))
				})
			}
		})
	}
}

// lockProc is a running baton lock.
type lockProc struct {
	cmd    *exec.Cmd
	stderr envtest.Buffer
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

func lockLossTrial(t *testing.T, addr string, flags func(string) []string, name, script string, extraEnv ...string) time.Duration {
	dir := t.TempDir()
	file, pids := filepath.Join(dir, "beats"), filepath.Join(dir, "pids")
	if err := os.Mkdir(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	proxy, err := proxytest.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	env := append(append(os.Environ(), "F="+file, "P="+pids), extraEnv...)
	// TTL 5 s: a SafetyMargin of 1 s, half of which is what the lost
	// holder has to deliver its SIGKILL and see its processes gone before
	// the lease could pass (election.GoneBy). With TTL 2 s (250 ms), under
	// ci-loaded, a cgroup's processes were still there 300 ms after the
	// GoneBy instant, when the next holder's command started.
	args := func(a, id string) []string {
		return append(append([]string{"lock"}, flags(a)...), "--ttl=5s", "--id="+id, name, "--", "sh", "-c", script)
	}
	old := startLock(t, env, args(proxy.Addr(), "old")...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("old baton lock's stderr:\n%s", &old.stderr)
		}
	})
	envtest.WaitFor(t, 20*time.Second, "the first holder's command to beat for 500 ms", func() bool {
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
	envtest.WaitFor(t, 30*time.Second, "the next holder's command to start", func() bool {
		for tok, r := range killtest.Read(t, file) {
			if tok > oldTok && r.Beats {
				nextTok = tok
				return true
			}
		}
		return false
	})
	if left := killtest.Survivors(t, "F="+file, "BATON_TOKEN="+strconv.FormatUint(oldTok, 10)); len(left) > 0 {
		t.Errorf("processes of the old holder (token %d) alive after the next holder's command started: %s", oldTok, left)
	}
	if pid := recs[oldTok].PID; pid > 0 {
		envtest.WaitFor(t, 20*time.Second, "the end of the old command", func() bool { return !killtest.Alive(pid) })
	}
	gap := killtest.ReportHandover(t, file, oldTok, nextTok, cut)
	_ = next
	return gap
}

// baton lock on a Kubernetes Lease of a real kube-apiserver: the command
// sees the fencing token, a second baton lock waits while the first holds
// the Lease, the Lease names the holder (what kubectl get lease shows),
// and the next term's token is higher.
func TestLock_Kube(t *testing.T) {
	srv, dir, tokenFile := kubeServer(t)
	flags := []string{"--backend=kube", "--kube-server=" + srv.URL, "--kube-token-file=" + tokenFile, "--kube-cacert=" + srv.CAFile, "--ttl=3s"}
	lock := func(extra ...string) []string { return append(append([]string{"lock"}, flags...), extra...) }

	tok1 := filepath.Join(dir, "token1")
	if _, errOut, code := runBaton(t, lock("nightly-report", "--", "sh", "-c", `echo "$BATON_TOKEN" > `+tok1+`; exit 7`)...); code != 7 {
		t.Fatalf("exit 7: baton lock exited %d: %s", code, errOut)
	}
	first := readToken(t, tok1)

	held := filepath.Join(dir, "held")
	holder := exec.Command(batonBinary(t), lock("--id=holder-1", "nightly-report", "--", "sh", "-c", "touch "+held+"; sleep 60")...)
	holder.Stderr = os.Stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	if !waitUntil(20*time.Second, func() bool { return exists(held) }) {
		t.Fatal("the first baton lock never ran its command")
	}
	if who := leaseHolder(t, srv, "nightly-report"); who != "holder-1" {
		t.Errorf("the Lease's holderIdentity is %q, want holder-1", who)
	}
	second := filepath.Join(dir, "second")
	if _, errOut, code := runBaton(t, lock("--timeout=4s", "nightly-report", "--", "touch", second)...); code != 1 || exists(second) {
		t.Fatalf("a second baton lock ran while the first held the Lease: exit %d: %s", code, errOut)
	}
	holder.Process.Signal(syscall.SIGTERM)
	holder.Wait()
	tok2 := filepath.Join(dir, "token2")
	start := time.Now()
	if _, errOut, code := runBaton(t, lock("--timeout=10s", "nightly-report", "--", "sh", "-c", `echo "$BATON_TOKEN" > `+tok2)...); code != 0 {
		t.Fatalf("after the holder stopped: baton lock exited %d: %s", code, errOut)
	}
	t.Logf("the next baton lock ran %v after the holder stopped", time.Since(start).Round(time.Millisecond))
	if next := readToken(t, tok2); next <= first {
		t.Errorf("tokens %d then %d (and a term between): not rising", first, next)
	}
}

// kubeServer starts etcd and a kube-apiserver for t (skipping under
// -short) and returns it, a directory of t's and a file in it holding the
// server's admin token.
func kubeServer(t *testing.T) (srv *kubetest.Server, dir, tokenFile string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd, kube-apiserver and processes")
	}
	srv = kubetest.StartT(t, kubetest.Options{})
	dir = t.TempDir()
	tokenFile = filepath.Join(dir, "kube-token")
	if err := os.WriteFile(tokenFile, []byte(kubetest.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, dir, tokenFile
}

func readToken(t *testing.T, path string) uint64 {
	t.Helper()
	raw, _ := os.ReadFile(path)
	n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("BATON_TOKEN = %q, want a fencing token", raw)
	}
	return n
}

// leaseHolder reads spec.holderIdentity of the Lease name in default.
func leaseHolder(t *testing.T, srv *kubetest.Server, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/apis/coordination.k8s.io/v1/namespaces/default/leases/%s", srv.URL, name), nil)
	req.Header.Set("Authorization", "Bearer "+kubetest.Token)
	resp, err := srv.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Spec struct {
			HolderIdentity string `json:"holderIdentity"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l.Spec.HolderIdentity
}
