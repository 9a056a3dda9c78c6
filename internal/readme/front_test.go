package readme_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// backendNames is how the README's first paragraph names the store of
// each backend package. A new backend needs a row here, and its name in
// that paragraph.
var backendNames = map[string][]string{
	"backends/etcd":         {"etcd"},
	"backends/consul":       {"Consul"},
	"backends/redis":        {"Redis"},
	"backends/sql/postgres": {"PostgreSQL"},
	"backends/sql/mysql":    {"MySQL/MariaDB"},
	"backends/memory":       {"in memory"},
	"backends/kube":         {"Kubernetes Lease"},
	"backends/sql":          nil, // the dialects name it
}

// TestREADME_Front checks the README's size (at most 300 lines) and that
// its first paragraph names the store of every backend package.
func TestREADME_Front(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "\n"); n > 300 {
		t.Errorf("README.md has %d lines, want at most 300", n)
	}
	para := firstParagraph(text)
	out, err := exec.Command("go", "list", "github.com/batonhq/baton/backends/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	n := 0
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(pkg, "github.com/batonhq/baton/")
		names, ok := backendNames[rel]
		if !ok {
			t.Errorf("%s: a backend package with no row in backendNames", rel)
			continue
		}
		n++
		for _, name := range names {
			if !strings.Contains(para, name) {
				t.Errorf("README's first paragraph does not name %q (%s):\n%s", name, rel, para)
			}
		}
	}
	if n < 6 {
		t.Errorf("go list found %d backend packages, want at least 6", n)
	}
}

// firstParagraph is the README's text from the line after the title to
// the first blank line after some text, joined into one line.
func firstParagraph(text string) string {
	var words []string
	for i, line := range strings.Split(text, "\n") {
		if i == 0 || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			if len(words) > 0 {
				break
			}
			continue
		}
		words = append(words, strings.Fields(line)...)
	}
	return strings.Join(words, " ")
}
