package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/batonhq/baton/internal/kubetest"
)

// kubeconfigFor writes a kubeconfig in dir whose current context reaches
// srv as user (YAML lines under "user:"), and returns its path.
func kubeconfigFor(t *testing.T, srv *kubetest.Server, dir, user string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: rig
clusters:
- name: rig
  cluster: {server: %q, certificate-authority: %q}
contexts:
- name: rig
  context: {cluster: rig, user: me, namespace: default}
users:
- name: me
  user:
%s
`, srv.URL, srv.CAFile, user)
	p := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// baton lock reaches the API server as kubectl would: through a
// kubeconfig whose user is a client certificate (--kubeconfig), and
// through $KUBECONFIG whose user is an exec credential plugin.
func TestLock_KubeKubeconfig(t *testing.T) {
	srv, dir, _ := kubeServer(t)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	pair, err := srv.ClientCert("lock-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	certDir := filepath.Join(dir, "cert")
	os.Mkdir(certDir, 0o755)
	kc := kubeconfigFor(t, srv, certDir, fmt.Sprintf("    client-certificate: %s\n    client-key: %s", pair.CertFile, pair.KeyFile))
	ran := filepath.Join(dir, "ran-cert")
	if _, errOut, code := runBaton(t, "lock", "--backend=kube", "--kubeconfig="+kc, "--ttl=3s", "kubeconfig-cert", "--", "touch", ran); code != 0 || !exists(ran) {
		t.Fatalf("baton lock --kubeconfig (client certificate): exit %d: %s", code, errOut)
	}

	execDir := filepath.Join(dir, "exec")
	os.Mkdir(execDir, 0o755)
	script := `#!/bin/sh
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$RIG_TOKEN"
`
	if err := os.WriteFile(filepath.Join(execDir, "cred.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	kc = kubeconfigFor(t, srv, execDir, `    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./cred.sh
      env: [{name: RIG_TOKEN, value: `+kubetest.Token+`}]
      interactiveMode: Never`)
	t.Setenv("KUBECONFIG", kc)
	ran = filepath.Join(dir, "ran-exec")
	if _, errOut, code := runBaton(t, "lock", "--backend=kube", "--ttl=3s", "kubeconfig-exec", "--", "touch", ran); code != 0 || !exists(ran) {
		t.Fatalf("baton lock with $KUBECONFIG (exec plugin): exit %d: %s", code, errOut)
	}
}
