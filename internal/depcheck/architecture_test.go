package depcheck

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/batonhq/baton"

// rule is one row of docs/ARCHITECTURE.md's import table: the packages
// its left cell matches may import, of this module, only what its right
// cell matches.
type rule struct {
	line     int
	pkgs     []string
	mayCross []string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readRules reads the table between the depcheck markers.
func readRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, "<!-- depcheck:begin -->"), strings.Index(s, "<!-- depcheck:end -->")
	if i < 0 || j < i {
		t.Fatal("docs/ARCHITECTURE.md: no depcheck:begin and depcheck:end markers")
	}
	first := strings.Count(s[:i], "\n") + 1
	var rules []rule
	for n, line := range strings.Split(s[i:j], "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 2 || strings.Contains(cells[0], "---") || strings.TrimSpace(cells[0]) == "package" {
			continue
		}
		r := rule{line: first + n}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			r.pkgs = append(r.pkgs, m[1])
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			r.mayCross = append(r.mayCross, m[1])
		}
		if len(r.pkgs) == 0 {
			t.Fatalf("docs/ARCHITECTURE.md:%d: a row that names no package: %q", r.line, line)
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		t.Fatal("docs/ARCHITECTURE.md: the depcheck table has no rows")
	}
	return rules
}

// matches reports whether pkg (relative to the module) matches pattern:
// path.Match, or a "/..." suffix for the pattern's folder and all below.
func matches(pattern, pkg string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == dir || strings.HasPrefix(pkg, dir+"/")
	}
	ok, _ := path.Match(pattern, pkg)
	return ok
}

func matchesAny(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if matches(p, pkg) {
			return true
		}
	}
	return false
}

// isRig reports whether pkg is a test rig: its last element ends in
// "test" (backendtest, consultest, killtest, ...).
func isRig(pkg string) bool { return strings.HasSuffix(path.Base(pkg), "test") }

// TestArchitectureTable checks every package of the module, by its
// non-test imports, against docs/ARCHITECTURE.md's table, and that only
// tests and other rigs import the test rigs.
func TestArchitectureTable(t *testing.T) {
	rules := readRules(t)
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	n := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkg, ok := strings.CutPrefix(f[0], module+"/")
		if f[0] == module {
			pkg, ok = ".", true // the root package, baton
		}
		if !ok {
			t.Errorf("%s: outside the module: no row can name it", f[0])
			continue
		}
		n++
		var r *rule
		for i := range rules {
			if matchesAny(rules[i].pkgs, pkg) {
				r = &rules[i]
				break
			}
		}
		if r == nil {
			t.Errorf("%s: no row of docs/ARCHITECTURE.md's table names it", pkg)
			continue
		}
		for _, imp := range f[1:] {
			dep, ours := strings.CutPrefix(imp, module+"/")
			if !ours {
				continue
			}
			if !matchesAny(r.mayCross, dep) {
				t.Errorf("%s imports %s, which docs/ARCHITECTURE.md:%d does not allow (%v)", pkg, dep, r.line, r.mayCross)
			}
			if isRig(dep) && !isRig(pkg) {
				t.Errorf("%s imports the test rig %s outside its tests", pkg, dep)
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list named %d packages of the module; want them all", n)
	}
	t.Logf("%d packages checked against %d rows", n, len(rules))
}

// The checker itself: a row's patterns, and an import beyond a row.
func TestArchitectureMatching(t *testing.T) {
	for _, c := range []struct {
		pattern, pkg string
		want         bool
	}{
		{"backends/...", "backends/sql/mysql", true},
		{"backends/...", "backends", true},
		{"backends/...", "backendsx", false},
		{"backends/*/*test", "backends/consul/consultest", true},
		{"backends/*/*test", "backends/consul", false},
		{"cmd/*", "cmd/baton", true},
		{"cmd/*", "cmd/baton/x", false},
		{"fence", "fence/redisfence", false},
	} {
		if got := matches(c.pattern, c.pkg); got != c.want {
			t.Errorf("matches(%q, %q) = %v, want %v", c.pattern, c.pkg, got, c.want)
		}
	}
	if !isRig("backendtest") || isRig("internal/lines") {
		t.Error("isRig: backendtest is a rig, lines is not")
	}
}

// usersOnly are the public packages that the module's own code does not
// import, because they are there for users: the front door and the
// in-memory backend, the fences and their kit.
var usersOnly = map[string]bool{".": true, "backends/memory": true, "fence": true, "fence/redisfence": true, "fence/fencetest": true}

// TestNoPublicTestOnlyPackage fails for a public package (one outside
// every internal/ folder) that only tests of the module import (or test
// rigs, which import testing in their non-test files), apart
// from backendtest, the one conformance suite, and usersOnly: a test rig
// in the public API.
func TestNoPublicTestOnlyPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}} {{.Name}} | {{join .Imports " "}} | {{join .TestImports " "}} {{join .XTestImports " "}}`,
		module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	names := map[string]string{}
	byCode, byTests := map[string]bool{}, map[string]bool{}
	for line := range strings.Lines(string(out)) {
		parts := strings.Split(strings.TrimRight(line, "\n"), " | ")
		if len(parts) != 3 {
			continue
		}
		f := strings.Fields(parts[0])
		names[f[0]] = f[1]
		imps := strings.Fields(parts[1])
		// A package that imports testing in its non-test files is a rig:
		// what it imports, only tests use.
		used := byCode
		if slices.Contains(imps, "testing") {
			used = byTests
		}
		for _, imp := range imps {
			used[imp] = true
		}
		for _, imp := range strings.Fields(parts[2]) {
			byTests[imp] = true
		}
	}
	n := 0
	for p, name := range names {
		rel := "."
		if p != module {
			rel = strings.TrimPrefix(p, module+"/")
		}
		if name == "main" || rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") {
			continue
		}
		n++
		if byTests[p] && !byCode[p] && rel != "backendtest" && !usersOnly[rel] {
			t.Errorf("%s: a public package that only tests import; move it under an internal/ folder", rel)
		}
	}
	if n < 10 {
		t.Fatalf("found %d public packages; want them all", n)
	}
	if !t.Failed() {
		t.Logf("%d public packages, none used only by tests apart from backendtest", n)
	}
}
