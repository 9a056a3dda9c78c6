package depcheck

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
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
// "test" (electiontest, hosttest, consultest, ...).
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
		{"election", "election/kit", false},
	} {
		if got := matches(c.pattern, c.pkg); got != c.want {
			t.Errorf("matches(%q, %q) = %v, want %v", c.pattern, c.pkg, got, c.want)
		}
	}
	if !isRig("schedulerhost/hosttest") || isRig("internal/testenv") {
		t.Error("isRig: hosttest is a rig, testenv is not")
	}
}
