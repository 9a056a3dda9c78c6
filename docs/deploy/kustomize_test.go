package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/kubetest"
)

// kustomization.yaml is a base a user overlays: kubectl kustomize renders
// an overlay of it (another image tag, 3 replicas), and a real
// kube-apiserver accepts every object it renders (server-side dry run),
// with the hardened settings and the PodDisruptionBudget intact.
func TestKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl on $PATH (kubectl kustomize renders the base)")
	}
	base, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	rel, err := filepath.Rel(overlay, base)
	if err != nil {
		t.Fatal(err)
	}
	k := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [` + rel + `]
images:
  - {name: registry.example.com/billing, newTag: "1.43.0"}
patches:
  - target: {kind: Deployment, name: billing}
    patch: '[{"op": "replace", "path": "/spec/replicas", "value": 3}]'
`
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", overlay)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize: %v: %s", err, stderr.String())
	}

	srv := kubetest.StartT(t, kubetest.Options{})
	var docs []map[string]any
	var kinds []string
	dec := yaml.NewDecoder(&out)
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the rendered overlay: %v", err)
		}
		kind, _ := d["kind"].(string)
		path, ok := kubePaths[kind]
		if !ok {
			t.Fatalf("the rendered overlay: kind %q: not one the test knows", kind)
		}
		if code, body := kubeCall(t, srv, http.MethodPost, path+"?dryRun=All&fieldValidation=Strict", d); code != http.StatusCreated {
			t.Fatalf("the rendered overlay: %s: server-side dry run: %d %s", kind, code, body)
		}
		docs, kinds = append(docs, d), append(kinds, kind)
	}
	t.Logf("rendered and accepted: %v", kinds)
	pdbFor(t, "the rendered overlay", docs)
	for _, d := range docs {
		if d["kind"] != "Deployment" {
			continue
		}
		hardened(t, "the rendered overlay", d, "baton")
		if r := get(d, "spec", "replicas"); toInt(r) != 3 {
			t.Errorf("the overlay's replicas: %v, want 3", r)
		}
		if img := get(d, "spec", "template", "spec", "containers", 0, "image"); img != "registry.example.com/billing:1.43.0" {
			t.Errorf("the overlay's image: %v, want registry.example.com/billing:1.43.0", img)
		}
	}
}
