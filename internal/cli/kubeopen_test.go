package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/kubetest"
)

// Where the kube backend reaches the API server, in order: --kube-server,
// --kubeconfig, the pod's service account, $KUBECONFIG.
func TestKubeOpen_Precedence(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server, ns string) string {
		p := filepath.Join(dir, name)
		cfg := "current-context: c\nclusters: [{name: k, cluster: {server: '" + server + "'}}]\n" +
			"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: k, user: u, namespace: " + ns + "}}]\n"
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := write("env", "https://from-env:6443", "env-ns")
	flag := write("flag", "https://from-flag:6443", "flag-ns")
	t.Setenv("KUBECONFIG", env)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tc := range []struct {
		name               string
		b                  BackendFlags
		inPod              bool
		wantServer, wantNS string
	}{
		{"--kube-server first", BackendFlags{kubeServer: "https://explicit:6443", kubeconfig: flag}, true, "https://explicit:6443", ""},
		{"--kubeconfig before the pod", BackendFlags{kubeconfig: flag}, true, "https://from-flag:6443", "flag-ns"},
		{"the pod before $KUBECONFIG", BackendFlags{}, true, "https://10.0.0.1:443", ""},
		{"$KUBECONFIG outside a pod", BackendFlags{}, false, "https://from-env:6443", "env-ns"},
	} {
		if tc.inPod {
			t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
			t.Setenv("KUBERNETES_SERVICE_PORT", "443")
		} else {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
		}
		cc, ns, err := tc.b.kubeClientConfig()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if cc.Server != tc.wantServer || (tc.wantNS != "" && ns != tc.wantNS) {
			t.Errorf("%s: server %q namespace %q, want %q %q", tc.name, cc.Server, ns, tc.wantServer, tc.wantNS)
		}
	}

	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	b := BackendFlags{kubeconfig: filepath.Join(dir, "missing")}
	if _, _, err := b.kubeClientConfig(); err == nil || !strings.HasPrefix(err.Error(), "--kubeconfig: ") || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing --kubeconfig: %v, want an error naming the flag and the file", err)
	}
	insecure := filepath.Join(dir, "insecure")
	os.WriteFile(insecure, []byte("current-context: c\nclusters: [{name: k, cluster: {server: 'https://x:1', insecure-skip-tls-verify: true}}]\ncontexts: [{name: c, context: {cluster: k}}]\n"), 0o600)
	b = BackendFlags{kubeconfig: insecure}
	if _, _, err := b.kubeClientConfig(); err == nil || !strings.Contains(err.Error(), "insecure-skip-tls-verify") {
		t.Errorf("an insecure cluster: %v, want it refused", err)
	}
	b = BackendFlags{kubeconfig: insecure, kubeInsecureSkipVerify: true}
	if cc, _, err := b.kubeClientConfig(); err != nil || !cc.InsecureSkipVerify {
		t.Errorf("an insecure cluster with --kube-insecure-skip-tls-verify: %+v, %v", cc, err)
	}
}

// A kubeconfig user the API server does not accept (401) is named with
// its context, and how to check it.
func TestNode_KubeconfigUnauthorizedNamesTheContext(t *testing.T) {
	s := kubetest.StartT(t, kubetest.Options{})
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "current-context: dev\nclusters: [{name: k, cluster: {server: '" + s.URL + "', certificate-authority: '" + s.CAFile + "'}}]\n" +
		"users: [{name: u, user: {token: not-a-token}}]\ncontexts: [{name: dev, context: {cluster: k, user: u}}]\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	got := runErr(t, "election:\n  name: billing-jobs\nbackend:\n  kind: kube\n  kubeconfig: "+kc+"\n"+jobsTail)
	t.Log(got)
	for _, want := range []string{"401 Unauthorized", `the user of context "dev"`, "kubectl --context dev auth whoami"} {
		if !strings.Contains(got, want) {
			t.Errorf("error does not say %q:\n%s", want, got)
		}
	}
}
