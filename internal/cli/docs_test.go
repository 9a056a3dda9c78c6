package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/batonhq/baton/election"
)

// readDoc returns a file of the repository, by its path from the root.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// backendKinds are the kinds --backend takes, as Open's refusal lists them.
func backendKinds(t *testing.T) []string {
	t.Helper()
	b := &BackendFlags{Kind: "none", Election: "e"}
	_, err := b.Open(context.Background(), election.Timing{}, 0, slog.New(slog.DiscardHandler))
	m := regexp.MustCompile(`want (.*) or (\w+)$`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("Open of kind none: %v, want the list of kinds", err)
	}
	return append(strings.Split(m[1], ", "), m[2])
}

// The README's config comment and docs/configuration.md name every
// backend `baton run` takes, Kubernetes included, and no longer call
// Kubernetes `baton lock` only; the election.ttl row gives every
// backend's default.
func TestDocs_EveryBackendNamed(t *testing.T) {
	kinds := backendKinds(t)
	readme := readDoc(t, "README.md")
	m := regexp.MustCompile(`(?m)^  kind: etcd +# or (.*)$`).FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README.md: no `kind: etcd  # or ...` line in the config example")
	}
	for _, k := range kinds[1:] {
		if !strings.Contains(m[1], k) {
			t.Errorf("README.md: the config example's comment %q does not name kind %s", m[0], k)
		}
	}
	conf := readDoc(t, "docs/configuration.md")
	if strings.Contains(conf, "only, so far") {
		t.Error("docs/configuration.md still calls a backend `baton lock` only")
	}
	row := regexp.MustCompile("(?m)^\\| `election.ttl` \\|.*$").FindString(conf)
	for _, name := range []string{"etcd", "SQL", "Redis", "Consul", "Kubernetes"} {
		if !strings.Contains(row, name) {
			t.Errorf("docs/configuration.md: the election.ttl row does not give %s's default: %s", name, row)
		}
	}
}

// docs/backends/kube.md's configuration table gives each Kubernetes flag
// with its config file key, and says that --ttl is `baton lock`'s only:
// `baton run` has no such flag (its TTL is election.ttl).
func TestDocs_KubeConfigKeys(t *testing.T) {
	doc := readDoc(t, "docs/backends/kube.md")
	rows := map[string]string{}
	for _, line := range strings.Split(doc, "\n") {
		if m := regexp.MustCompile("^\\| `([a-z_.]+)(: kube)?` \\| `(--[a-z-]+)").FindStringSubmatch(line); m != nil {
			rows[m[3]] = line
			if key := m[1]; strings.HasPrefix(key, "backend.kube_") && "--"+strings.ReplaceAll(strings.TrimPrefix(key, "backend."), "_", "-") != m[3] {
				t.Errorf("docs/backends/kube.md: key %s is not flag %s's: %s", key, m[3], line)
			}
		}
	}
	n := 0
	for _, name := range backendFlagNames {
		if strings.HasPrefix(name, "kube-") {
			n++
			if rows["--"+name] == "" {
				t.Errorf("docs/backends/kube.md: no row for --%s with its config key backend.%s", name, strings.ReplaceAll(name, "-", "_"))
			}
		}
	}
	if n == 0 {
		t.Fatal("no kube- flags registered")
	}
	if r := rows["--ttl"]; !strings.HasPrefix(r, "| `election.ttl` |") || !strings.Contains(r, "`baton lock` only") {
		t.Errorf("docs/backends/kube.md: the TTL row %q: want election.ttl, --ttl for baton lock only", r)
	}
	p := &Program{Name: "baton", Getenv: env(nil)}
	if _, _, _, err := p.nodeSettings("run", []string{"--ttl", "15s"}, io.Discard); err == nil || !strings.Contains(err.Error(), "-ttl") {
		t.Errorf("baton run --ttl: %v, want it refused (no such flag)", err)
	}
}
