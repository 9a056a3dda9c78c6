package consul_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/internal/envtest"
)

// TestConsulLock_Interop checks mutual exclusion with `consul lock
// service/baton/NAME` (the consul binary) both ways, on the key `demo node
// --backend consul --election NAME` locks: LockKey("service/baton/NAME").
func TestConsulLock_Interop(t *testing.T) {
	a := sharedAgent(t)
	prefix := fmt.Sprintf("service/baton/interop-%d", keySeq.Add(1))
	key := consul.LockKey(prefix)
	if want := prefix + "/.lock"; key != want {
		t.Fatalf("LockKey(%q) = %q, want %q (the key consul lock locks)", prefix, key, want)
	}
	c := newCandidate(t, a, key)
	dir := t.TempDir()
	httpAddr := "-http-addr=http://" + a.HTTPAddr

	// 1. `consul lock` holds the lock: our candidate waits.
	held := filepath.Join(dir, "held")
	lockCmd := exec.Command(a.Binary, "lock", httpAddr, "-name=interop-test", prefix, "touch "+held+" && sleep 60")
	lockCmd.Stdout, lockCmd.Stderr = os.Stderr, os.Stderr
	if err := lockCmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- lockCmd.Wait() }()
	defer func() {
		if lockCmd.ProcessState == nil {
			lockCmd.Process.Kill()
			<-exited
		}
	}()
	waitFor(t, 20*time.Second, "consul lock to run its command", func() bool { _, err := os.Stat(held); return err == nil })
	info, err := c.Leader(context.Background())
	if err != nil {
		t.Fatalf("Leader() while consul lock holds: %v", err)
	}
	t.Logf("Leader() while consul lock holds: %+v", info)
	if !strings.HasPrefix(info.Identity.ID, "session:") {
		t.Errorf("Leader() while consul lock holds: ID %q, want the holder's session (session:...)", info.Identity.ID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := backendtest.AcquireAsync(ctx, c, "baton")
	select {
	case r := <-ch:
		t.Fatalf("Acquire returned while consul lock held the key: lease %v, err %v", r.Lease, r.Err)
	case <-time.After(3 * time.Second):
	}
	stopped := time.Now()
	lockCmd.Process.Signal(os.Interrupt) // consul lock releases on interrupt
	r := backendtest.Await(t, ch, 10*time.Second, "Acquire did not return within 10s of consul lock being interrupted")
	if r.Err != nil {
		t.Fatalf("Acquire after consul lock exited: %v", r.Err)
	}
	t.Logf("baton led %v after consul lock was interrupted", r.At.Sub(stopped).Round(time.Millisecond))
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Error("consul lock did not exit within 10s of SIGINT")
	}

	// 2. We hold the lock: `consul lock` cannot take it.
	ran := filepath.Join(dir, "ran")
	out, err := exec.Command(a.Binary, "lock", httpAddr, "-timeout=2s", prefix, "touch "+ran).CombinedOutput()
	if err == nil {
		t.Errorf("consul lock -timeout=2s succeeded while baton held the key:\n%s", out)
	}
	if _, serr := os.Stat(ran); serr == nil {
		t.Errorf("consul lock ran its command while baton held the key:\n%s", out)
	}
	t.Logf("consul lock while baton holds: %v: %s", err, out)
	if info, err := c.Leader(context.Background()); err != nil || info.Identity.ID != "baton" {
		t.Errorf("Leader() while baton holds = %+v, %v; want baton", info, err)
	}

	// 3. Once we release, `consul lock` gets it.
	backendtest.Release(t, r.Lease)
	out, err = exec.Command(a.Binary, "lock", httpAddr, "-timeout=10s", prefix, "touch "+ran).CombinedOutput()
	if err != nil {
		t.Errorf("consul lock after baton released: %v\n%s", err, out)
	}
	if _, serr := os.Stat(ran); serr != nil {
		t.Errorf("consul lock did not run its command after baton released:\n%s", out)
	}
}

// waitFor polls cond every 20 ms until it holds or fails t after d.
var waitFor = envtest.WaitFor
