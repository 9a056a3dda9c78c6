package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/kubetest"
)

// The collection each kind of the kube-*.yaml files is created in,
// namespace default.
var kubePaths = map[string]string{
	"ServiceAccount":      "/api/v1/namespaces/default/serviceaccounts",
	"Role":                "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
	"RoleBinding":         "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
	"ConfigMap":           "/api/v1/namespaces/default/configmaps",
	"Deployment":          "/apis/apps/v1/namespaces/default/deployments",
	"PodDisruptionBudget": "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
}

// kube-lock.yaml is accepted by a real kube-apiserver (server-side dry
// run, which runs validation and admission); and with its ServiceAccount,
// Role and RoleBinding created, baton's backend runs as that
// ServiceAccount: it checks, leads, hands over with a rising token, and
// is refused the Leases the Role does not name.
func TestKubeLock(t *testing.T) {
	const token = "nightly-report-sa-token"
	srv := kubetest.StartT(t, kubetest.Options{Users: map[string]string{token: "system:serviceaccount:default:nightly-report"}})
	var kinds []string
	var lockName string
	docs := applyDocs(t, srv, "kube-lock.yaml")
	pdbFor(t, "kube-lock.yaml", docs)
	for _, d := range docs {
		kind, _ := d["kind"].(string)
		kinds = append(kinds, kind)
		if kind == "Deployment" {
			hardened(t, "kube-lock.yaml", d, "report")
			cmd, _ := get(d, "spec", "template", "spec", "containers", 0, "command").([]any)
			i := slices.Index(cmd, any("--"))
			if len(cmd) < 3 || cmd[0] != "baton" || cmd[1] != "lock" || i < 1 {
				t.Fatalf("the Deployment's command %v: want baton lock ... NAME -- CMD", cmd)
			}
			lockName, _ = cmd[i-1].(string)
		}
	}
	if want := []string{"ServiceAccount", "Role", "RoleBinding", "Deployment", "PodDisruptionBudget"}; !slices.Equal(kinds, want) {
		t.Fatalf("kube-lock.yaml holds %v, want %v", kinds, want)
	}

	// The backend, as the ServiceAccount with only the Role.
	c := clientAs(t, srv, token)
	b, err := kube.New(kube.Config{Client: c, Name: lockName, Timing: election.Timing{TTL: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Check(ctx); err != nil {
		t.Fatalf("Check as the ServiceAccount: %v", err)
	}
	var last uint64
	for i := range 3 {
		l, err := b.Acquire(ctx, election.Identity{ID: fmt.Sprintf("pod-%d", i)})
		if err != nil {
			t.Fatalf("term %d as the ServiceAccount: %v", i, err)
		}
		if l.Token() <= last {
			t.Errorf("term %d: token %d after %d", i, l.Token(), last)
		}
		last = l.Token()
		// The new leader's Event on the Lease, created as the
		// ServiceAccount (the Role's create on events).
		leaderEvent(t, srv, lockName, fmt.Sprintf("pod-%d became leader with fencing token %d", i, last))
		if err := l.Release(ctx); err != nil {
			t.Errorf("term %d: release: %v", i, err)
		}
	}
	other, err := kube.New(kube.Config{Client: c, Name: "another-lease"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Check(ctx); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("Check of a Lease the Role does not name: %v, want 403 Forbidden", err)
	}
}

// applyDocs sends each document of file to the server with server-side
// dry run (validation and admission), and creates the ServiceAccounts,
// Roles and RoleBindings for real. It returns the documents.
func applyDocs(t *testing.T, srv *kubetest.Server, file string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		kind, _ := d["kind"].(string)
		path, ok := kubePaths[kind]
		if !ok {
			t.Fatalf("%s: kind %q: not one the test knows", file, kind)
		}
		if code, body := kubeCall(t, srv, http.MethodPost, path+"?dryRun=All&fieldValidation=Strict", d); code != http.StatusCreated {
			t.Fatalf("%s: %s: server-side dry run: %d %s", file, kind, code, body)
		}
		switch kind {
		case "ServiceAccount", "Role", "RoleBinding":
			if code, body := kubeCall(t, srv, http.MethodPost, path, d); code != http.StatusCreated {
				t.Fatalf("%s: %s: create: %d %s", file, kind, code, body)
			}
		}
		docs = append(docs, d)
	}
}

// clientAs is a Client of srv with the bearer token token, read from a
// file as a pod's service account token is.
func clientAs(t *testing.T, srv *kubetest.Server, token string) *kube.Client {
	t.Helper()
	tokenFile := t.TempDir() + "/token"
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClient(kube.ClientConfig{Server: srv.URL, TokenFile: tokenFile, CAFile: srv.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// kubeCall sends body as JSON with the admin token and returns the
// status and the answer.
func kubeCall(t *testing.T, srv *kubetest.Server, method, path string, body any) (int, string) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+kubetest.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}
