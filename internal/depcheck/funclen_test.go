package depcheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The size rules of the module's non-test Go files.
const (
	// maxFuncLines is the longest a function or method may be outside
	// the rigs, counted from its func line to its closing brace, both
	// included (its doc comment is not counted).
	maxFuncLines = 120
	// maxFileLines is the longest a non-test Go file may be, rigs
	// included, counted as its newlines plus a last unterminated line.
	maxFileLines = 400
)

// funclenRig reports whether the file at rel (slash-separated, relative
// to the module root) belongs to a rig, exempt from maxFuncLines: under
// e2e/, bench/, tools/ or backendtest/; a package under internal/ whose
// folder, or a folder above it below internal/, ends in "test"
// (consultest, envtest, execjob/killtest).
func funclenRig(rel string) bool {
	dir := path.Dir(rel)
	for _, top := range []string{"e2e", "bench", "tools", "backendtest"} {
		if dir == top || strings.HasPrefix(dir, top+"/") {
			return true
		}
	}
	below, ok := strings.CutPrefix(dir, "internal/")
	if !ok {
		return false
	}
	return slices.ContainsFunc(strings.Split(below, "/"), func(e string) bool { return strings.HasSuffix(e, "test") })
}

// funcLen is one function or method of a file and its length in lines.
type funcLen struct {
	name  string // Name, or Recv.Name for a method ((*T).Name for a pointer)
	line  int    // the line of its func keyword
	lines int    // from the func line to the closing brace, both included
}

// measureFuncs parses src (named filename in errors) and returns every
// function and method it declares with a body, in source order, with
// its length. A function literal counts in the declaration holding it.
func measureFuncs(filename string, src []byte) ([]funcLen, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []funcLen
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
		out = append(out, funcLen{name: declName(fd), line: start, lines: end - start + 1})
	}
	return out, nil
}

// declName names fd as a reader would look for it: Name, T.Name or
// (*T).Name.
func declName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	star := false
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = true, s.X
	}
	switch x := t.(type) { // strip type parameters: T[K, V]
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	recv := "?"
	if id, ok := t.(*ast.Ident); ok {
		recv = id.Name
	}
	if star {
		return fmt.Sprintf("(*%s).%s", recv, fd.Name.Name)
	}
	return recv + "." + fd.Name.Name
}

// moduleGoFiles returns the non-test .go files of the module rooted at
// root, slash-separated and relative to it: it skips testdata, folders
// the go command ignores (a name starting with "." or "_"), and every
// folder holding a go.mod of its own (another module: bench/, tools/*).
func moduleGoFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found %d non-test Go files under %s; want the module's all", len(files), root)
	}
	return files
}

// TestNoLongFunctions fails listing, as file:line name length, every
// function or method of the module's non-test files longer than
// maxFuncLines, outside the rigs (funclenRig).
func TestNoLongFunctions(t *testing.T) {
	root := filepath.Join("..", "..")
	n, exempt := 0, 0
	for _, rel := range moduleGoFiles(t, root) {
		if funclenRig(rel) {
			exempt++
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		fns, err := measureFuncs(rel, src)
		if err != nil {
			t.Fatal(err)
		}
		n += len(fns)
		for _, f := range fns {
			if f.lines > maxFuncLines {
				t.Errorf("%s:%d %s %d lines (over %d)", rel, f.line, f.name, f.lines, maxFuncLines)
			}
		}
	}
	t.Logf("%d functions measured; %d files of rigs exempt", n, exempt)
}

// TestNoLongFiles fails listing every non-test Go file of the module
// longer than maxFileLines, rigs included.
func TestNoLongFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	files := moduleGoFiles(t, root)
	for _, rel := range files {
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if n := fileLines(src); n > maxFileLines {
			t.Errorf("%s: %d lines (over %d)", rel, n, maxFileLines)
		}
	}
	t.Logf("%d files measured", len(files))
}

// fileLines counts src's lines as wc -l does, plus a last line without
// a newline.
func fileLines(src []byte) int {
	n := strings.Count(string(src), "\n")
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

// synthFunc returns a file declaring a function f of exactly lines lines
// (lines >= 2), func line and closing brace included, after a doc
// comment, and a method after it.
func synthFunc(lines int) []byte {
	var b strings.Builder
	b.WriteString("package p\n\n// f is synthetic.\nfunc f() {\n")
	for range lines - 2 {
		b.WriteString("\t_ = 0\n")
	}
	b.WriteString("}\n\nfunc (*T) m() {}\n")
	return []byte(b.String())
}

// TestMeasureFuncs shows the measurer counts a 121-line function as over
// the limit and a 120-line one as within it, from the func line (4,
// after the package clause and the doc comment) to the closing brace.
func TestMeasureFuncs(t *testing.T) {
	for _, c := range []struct {
		lines int
		over  bool
	}{{maxFuncLines, false}, {maxFuncLines + 1, true}, {2, false}} {
		fns, err := measureFuncs("synth.go", synthFunc(c.lines))
		if err != nil {
			t.Fatal(err)
		}
		want := []funcLen{{"f", 4, c.lines}, {"(*T).m", 4 + c.lines + 1, 1}}
		if !slices.Equal(fns, want) {
			t.Fatalf("%d-line function: measured %v, want %v", c.lines, fns, want)
		}
		if over := fns[0].lines > maxFuncLines; over != c.over {
			t.Errorf("%d-line function: over %d is %v, want %v", c.lines, maxFuncLines, over, c.over)
		}
	}
}

// TestFunclenRig pins which paths are rigs, exempt from maxFuncLines.
func TestFunclenRig(t *testing.T) {
	for rel, want := range map[string]bool{
		"e2e/internal/history/ticks.go":         true,
		"backendtest/ledger.go":                 true,
		"internal/consultest/consultest.go":     true,
		"internal/execjob/killtest/killtest.go": true,
		"internal/pghatest/pgha.go":             true,
		"internal/execjob/execjob.go":           false,
		"internal/cli/node.go":                  false,
		"backends/consul/ledger_claim.go":       false,
		"baton.go":                              false,
		"e2eish/x.go":                           false,
	} {
		if got := funclenRig(rel); got != want {
			t.Errorf("funclenRig(%q) = %v, want %v", rel, got, want)
		}
	}
}
