package kube_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/kubetest"
)

// writeKubeconfig writes a kubeconfig of one context, "test", whose
// cluster is the package's server (its CA by a relative path, as kind
// and minikube write it by absolute path) and whose user is user (YAML
// lines under "user:"), and returns its path.
func writeKubeconfig(t *testing.T, dir, user string) string {
	t.Helper()
	s := server(t)
	ca, err := os.ReadFile(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: test
clusters:
- name: rig
  cluster:
    server: %s
    certificate-authority: ca.crt
contexts:
- name: other
  context: {cluster: rig, user: nobody}
- name: test
  context: {cluster: rig, user: me, namespace: kc-ns}
users:
- name: me
  user:
%s
`, s.URL, user)
	p := filepath.Join(dir, "config")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// reachThrough takes and gives back a term through the kubeconfig at
// path: the API server accepted its credentials.
func reachThrough(t *testing.T, path string) kube.Kubeconfig {
	t.Helper()
	t.Setenv("KUBECONFIG", path)
	kc, err := kube.LoadKubeconfig(kube.KubeconfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kc.Context != "test" || kc.Namespace != "kc-ns" {
		t.Fatalf("context %q namespace %q, want test and kc-ns", kc.Context, kc.Namespace)
	}
	c, err := kube.NewClient(kc.Client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	b, err := kube.New(kube.Config{Client: c, Name: leaseName(t), Timing: election.Timing{TTL: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := b.Acquire(ctx, election.Identity{ID: "kubeconfig"})
	if err != nil {
		t.Fatalf("Acquire through %s: %v", path, err)
	}
	if info, err := b.Leader(ctx); err != nil || info.Identity.ID != "kubeconfig" {
		t.Fatalf("Leader: %+v, %v", info, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return kc
}

// A kubeconfig whose user is a client certificate signed by the API
// server's client CA, one as files and one inline (-data), as kind and
// kubeadm write them.
func TestKubeconfig_ClientCertificate(t *testing.T) {
	s := server(t)
	pair, err := s.ClientCert("kubeconfig-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("files", func(t *testing.T) {
		dir := t.TempDir()
		reachThrough(t, writeKubeconfig(t, dir, fmt.Sprintf("    client-certificate: %s\n    client-key: %s", pair.CertFile, pair.KeyFile)))
	})
	t.Run("data", func(t *testing.T) {
		cert, _ := os.ReadFile(pair.CertFile)
		key, _ := os.ReadFile(pair.KeyFile)
		dir := t.TempDir()
		reachThrough(t, writeKubeconfig(t, dir, fmt.Sprintf("    client-certificate-data: %s\n    client-key-data: %s",
			base64.StdEncoding.EncodeToString(cert), base64.StdEncoding.EncodeToString(key))))
	})
}

// An exec credential plugin, as cloud clusters use: a script printing an
// ExecCredential with the server's token. A token whose
// expirationTimestamp is near is fetched again; one without is kept.
func TestKubeconfig_ExecPlugin(t *testing.T) {
	for _, tc := range []struct {
		version, expiry string
		again           bool
	}{
		{"client.authentication.k8s.io/v1", `"expirationTimestamp": "'$(date -u -d @$(( $(date +%s) + 2 )) +%Y-%m-%dT%H:%M:%SZ)'",`, true},
		{"client.authentication.k8s.io/v1beta1", "", false},
	} {
		t.Run(tc.version[strings.LastIndex(tc.version, "/")+1:], func(t *testing.T) {
			dir := t.TempDir()
			script := fmt.Sprintf(`#!/bin/sh
echo run >> "$(dirname "$0")/runs"
case "$KUBERNETES_EXEC_INFO" in *'"kind":"ExecCredential"'*) ;; *) echo "no KUBERNETES_EXEC_INFO" >&2; exit 1;; esac
echo '{"apiVersion": "%s", "kind": "ExecCredential", "status": {%s "token": "'"$RIG_TOKEN"'"}}'
`, tc.version, tc.expiry)
			if err := os.WriteFile(filepath.Join(dir, "cred.sh"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			reachThrough(t, writeKubeconfig(t, dir, fmt.Sprintf(`    exec:
      apiVersion: %s
      command: ./cred.sh
      env: [{name: RIG_TOKEN, value: %s}]
      interactiveMode: Never`, tc.version, kubetest.Token)))
			b, _ := os.ReadFile(filepath.Join(dir, "runs"))
			runs := strings.Count(string(b), "run")
			if tc.again && runs < 2 {
				t.Fatalf("plugin ran %d times: a token near its expirationTimestamp was not fetched again", runs)
			}
			if !tc.again && runs != 1 {
				t.Fatalf("plugin ran %d times, want 1 (its token has no expiry)", runs)
			}
			t.Logf("plugin ran %d times", runs)
		})
	}
}

// What a kubeconfig must not do is refused, naming the field.
func TestKubeconfig_Refused(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"insecure", "clusters: [{name: c, cluster: {server: 'https://x:1', insecure-skip-tls-verify: true}}]\ncontexts: [{name: a, context: {cluster: c}}]\ncurrent-context: a\n", "insecure-skip-tls-verify"},
		{"bad data", "clusters: [{name: c, cluster: {server: 'https://x:1', certificate-authority-data: '!!'}}]\ncontexts: [{name: a, context: {cluster: c}}]\ncurrent-context: a\n", "certificate-authority-data"},
		{"no context", "clusters: []\n", "current-context"},
		{"missing context", "current-context: gone\n", `context "gone": not found`},
		{"exec version", "clusters: [{name: c, cluster: {server: 'https://x:1'}}]\nusers: [{name: u, user: {exec: {apiVersion: v9, command: x}}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}]\ncurrent-context: a\n", `exec apiVersion "v9"`},
	} {
		p := filepath.Join(t.TempDir(), "config")
		os.WriteFile(p, []byte(tc.file), 0o600)
		_, err := kube.LoadKubeconfig(kube.KubeconfigOptions{Paths: []string{p}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one naming %s", tc.name, err, tc.want)
		}
	}
	p := filepath.Join(t.TempDir(), "config")
	os.WriteFile(p, []byte("clusters: [{name: c, cluster: {server: 'https://x:1', insecure-skip-tls-verify: true}}]\ncontexts: [{name: a, context: {cluster: c}}]\ncurrent-context: a\n"), 0o600)
	kc, err := kube.LoadKubeconfig(kube.KubeconfigOptions{Paths: []string{p}, AllowInsecure: true})
	if err != nil || !kc.Client.InsecureSkipVerify {
		t.Fatalf("allowed insecure: %+v, %v", kc, err)
	}
}
