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

	"github.com/batonhq/baton/internal/kubetest"
)

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
