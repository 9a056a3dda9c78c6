package depcheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The paths of docs/ARCHITECTURE.md ("The path of a SIGTERM", "The path
// of the token") name each step as a file and a function in it:
// `path/file.go` `Func` or `path/file.go` `(*Type).Method`. These tests
// check that each such function is declared in that file, so that a
// rename or a move that leaves the paths behind fails.

// pathSections are the sections checked, and the fewest steps each must
// name (a section that lost its steps must not pass for want of any).
var pathSections = []struct {
	title string
	min   int
}{
	{"## The path of a SIGTERM", 20},
	{"## The path of the token", 15},
}

// step is one file and function a path names.
type step struct {
	file, fn string
	line     int // in the document
}

// stepRef is a backticked .go path followed by a backticked name, with
// only white space (a line break, say) between them.
var stepRef = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`\\s+`([^`]+)`")

// funcName is a name a step may give: Func, (*Type).Method or
// (Type).Method.
var funcName = regexp.MustCompile(`^(\(\*?[A-Za-z_]\w*\)\.)?[A-Za-z_]\w*$`)

// pathSteps returns the steps named in the section of doc that begins
// with the line title, up to the next "## " heading; ok is false when
// there is no such section.
func pathSteps(doc, title string) (steps []step, ok bool) {
	i := strings.Index(doc, "\n"+title+"\n")
	if i < 0 {
		return nil, false
	}
	i++
	end := len(doc)
	if j := strings.Index(doc[i+len(title):], "\n## "); j >= 0 {
		end = i + len(title) + j
	}
	sec := doc[i:end]
	first := strings.Count(doc[:i], "\n") + 1
	for _, m := range stepRef.FindAllStringSubmatchIndex(sec, -1) {
		steps = append(steps, step{file: sec[m[2]:m[3]], fn: sec[m[4]:m[5]], line: first + strings.Count(sec[:m[0]], "\n")})
	}
	return steps, true
}

// declared returns the functions and methods declared in the Go file
// at path, as a step names them.
func declared(path string) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if fd.Recv == nil || len(fd.Recv.List) == 0 {
			names[fd.Name.Name] = true
			continue
		}
		names[fmt.Sprintf("(%s).%s", recvName(fd.Recv.List[0].Type), fd.Name.Name)] = true
	}
	return names, nil
}

// recvName is a receiver's type as a step writes it: *T or T, type
// parameters left out.
func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return "*" + recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return fmt.Sprintf("%T", e)
}

// checkStep returns nil if s's function is declared in s's file, below
// the module's root.
func checkStep(root string, s step) error {
	if !funcName.MatchString(s.fn) {
		return fmt.Errorf("docs/ARCHITECTURE.md:%d: `%s` `%s`: not a function name (want Func or (*Type).Method)", s.line, s.file, s.fn)
	}
	names, err := declared(filepath.Join(root, filepath.FromSlash(s.file)))
	if err != nil {
		return fmt.Errorf("docs/ARCHITECTURE.md:%d: `%s`: %v", s.line, s.file, err)
	}
	if !names[s.fn] {
		return fmt.Errorf("docs/ARCHITECTURE.md:%d: `%s` declares no `%s`", s.line, s.file, s.fn)
	}
	return nil
}

// TestArchitecture_PathsNameRealFunctions: every step of the SIGTERM's
// and the token's paths names a function that its file declares.
func TestArchitecture_PathsNameRealFunctions(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range pathSections {
		steps, ok := pathSteps(string(b), sec.title)
		if !ok {
			t.Errorf("docs/ARCHITECTURE.md: no section %q", sec.title)
			continue
		}
		if len(steps) < sec.min {
			t.Errorf("docs/ARCHITECTURE.md: %q names %d steps (`file.go` `Func`), want %d or more", sec.title, len(steps), sec.min)
		}
		for _, s := range steps {
			if err := checkStep(root, s); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestArchitecture_PathCheckRefusesWrongNames: the check above fails on a
// function its file does not declare, a method given as a function, a
// file that is not there and a name that is no function's; and finds a
// step split over two lines.
func TestArchitecture_PathCheckRefusesWrongNames(t *testing.T) {
	doc := "x\n## The path of a test\n\n1. `run.go` `(*Baton).runGroup` then `run.go` `runActors`;\n" +
		"2. `run.go` `(*Baton).runGroupp`, `run.go` `runGroup`, `nope/none.go` `F`, `run.go`\n   `ErrRunTwice.Error`.\n## Next\n`run.go` `outside`\n"
	steps, ok := pathSteps(doc, "## The path of a test")
	if !ok || len(steps) != 6 {
		t.Fatalf("steps = %+v, %v; want 6", steps, ok)
	}
	root := filepath.Join("..", "..")
	for i, want := range []string{"", "", "declares no `(*Baton).runGroupp`", "declares no `runGroup`", "nope/none.go", "not a function name"} {
		err := checkStep(root, steps[i])
		switch {
		case want == "" && err != nil:
			t.Errorf("step %+v: %v, want it found", steps[i], err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("step %+v: %v, want an error saying %q", steps[i], err, want)
		}
	}
	if steps[5].line != 5 {
		t.Errorf("the step split over two lines is at line %d, want 5", steps[5].line)
	}
}
