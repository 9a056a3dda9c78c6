package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/kubetest"
)

const jobsTail = `jobs:
  - {name: a, schedule: "@every 1m", http: {url: "http://127.0.0.1:1/"}}
`

// runErr runs `baton run` on a config file holding yaml and returns its
// error with the file's directory dropped, as "baton.yaml:LINE: ...".
func runErr(t *testing.T, yaml string, extra ...string) string {
	t.Helper()
	path := writeConfig(t, yaml)
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "tok"), []byte("not-a-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Program{Name: "baton", Getenv: env(nil)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.Node(ctx, "run", append([]string{"--config", path, "--http", ""}, extra...), io.Discard, io.Discard)
	if err == nil {
		t.Fatal("no error")
	}
	return strings.ReplaceAll(err.Error(), filepath.Dir(path)+string(filepath.Separator), "")
}

// wantLines checks that every line of got starts with one of want, in
// order, and that there are as many.
func wantLines(t *testing.T, got string, want ...string) {
	t.Helper()
	lines := strings.Split(got, "\n")
	if len(lines) != len(want) {
		t.Errorf("error has %d lines, want %d:\n%s", len(lines), len(want), got)
		return
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d of the error:\n got %s\nwant %s...", i+1, lines[i], w)
		}
	}
}

// A bad value the backend refuses points at its own key and line in the
// config file, not at the election section's first line: an etcd TTL
// below 2 s (each of its problems), a bad Kubernetes namespace, a Lease
// name that is no DNS subdomain. A YAML syntax error is reported at the
// line it is on, and an empty election section names election.name.
func TestNode_ConfigErrorsAtTheirKey(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       []string
	}{
		{"etcd ttl", "election:\n  name: billing\n  ttl: 1500ms\nbackend:\n  kind: etcd\n  endpoints: http://127.0.0.1:1\n" + jobsTail, []string{
			"baton.yaml:3: election.ttl: etcd: invalid config: TTL 1.5s: below the backend minimum 2s",
			"baton.yaml:3: election.ttl: etcd: invalid config: TTL 1.5s: must be a whole multiple of 1s",
		}},
		{"kube namespace", "election:\n  name: billing-jobs\nbackend:\n  kind: kube\n  kube_server: https://127.0.0.1:1\n  kube_namespace: Bad_NS\n  kube_token_file: tok\n" + jobsTail, []string{
			`baton.yaml:6: backend.kube_namespace: kube: invalid config: Namespace "Bad_NS": must be a DNS label`,
		}},
		{"kube lease name", "election:\n  name: Billing_Jobs\nbackend:\n  kind: kube\n  kube_server: https://127.0.0.1:1\n  kube_token_file: tok\n" + jobsTail, []string{
			`baton.yaml:2: election.name: kube: invalid config: Name "Billing_Jobs": must be a DNS subdomain`,
		}},
		{"yaml syntax", "election:\n  name: billing\nbackend:\n  kind: [postgres\n  dsn: x\n" + jobsTail, []string{
			"baton.yaml:4: did not find expected ',' or ']'",
		}},
		{"empty election section", "election:\nbackend:\n  kind: etcd\n" + jobsTail, []string{
			"baton.yaml:1: election.name: required",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantLines(t, runErr(t, c.yaml), c.want...)
		})
	}
}

// An http:// API server URL would send the bearer token in clear: it is
// refused, at its key, unless kube_insecure_http says it is meant (as
// behind kubectl proxy); then the connection is tried.
func TestNode_KubePlainHTTPRefused(t *testing.T) {
	yaml := "election:\n  name: billing-jobs\nbackend:\n  kind: kube\n  kube_server: http://127.0.0.1:1\n  kube_token_file: tok\n" + jobsTail
	got := runErr(t, yaml)
	wantLines(t, got, `baton run: baton.yaml:5: backend.kube_server: --kube-server "http://127.0.0.1:1": plain http:// would send the bearer token in clear`)
	if !strings.Contains(got, "kube_insecure_http: true") {
		t.Errorf("the refusal does not say how to allow it: %s", got)
	}
	got = runErr(t, strings.Replace(yaml, "  kube_token_file: tok\n", "  kube_token_file: tok\n  kube_insecure_http: true\n", 1))
	if !strings.Contains(got, "connection refused") {
		t.Errorf("with kube_insecure_http: true: %s, want the connection tried (refused)", got)
	}
}

// A token the API server does not accept (401) says what to check: the
// token file, its expiry, the service account.
func TestNode_KubeUnauthorizedSaysWhatToCheck(t *testing.T) {
	s := kubetest.StartT(t, kubetest.Options{})
	yaml := "election:\n  name: billing-jobs\nbackend:\n  kind: kube\n  kube_server: " + s.URL +
		"\n  kube_cacert: " + s.CAFile + "\n  kube_token_file: tok\n" + jobsTail
	got := runErr(t, yaml)
	t.Log(got)
	for _, want := range []string{"401 Unauthorized", "the API server did not accept the bearer token", "baton.yaml:7: backend.kube_token_file", "expired", "service account"} {
		if !strings.Contains(got, want) {
			t.Errorf("error does not say %q:\n%s", want, got)
		}
	}
}
