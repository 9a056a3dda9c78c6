package depcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPublicAPIHasNoInternalType reads the non-test files of every public
// package (outside internal/ folders, commands aside) and fails where an
// exported declaration names a type of an internal package: an exported
// function's or method's signature, an exported type (alias or not), an
// exported field or interface method, or the type of an exported
// variable or constant. A user of the package could not name that type.
func TestPublicAPIHasNoInternalType(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Name}} {{.Dir}} {{join .GoFiles ","}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	n := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 4 || f[1] == "main" || isInternal(f[0]) {
			continue
		}
		n++
		for _, name := range strings.Split(f[3], ",") {
			for _, p := range internalTypesInAPI(t, filepath.Join(f[2], name)) {
				t.Errorf("%s: %s", strings.TrimPrefix(f[0], module+"/"), p)
			}
		}
	}
	if n < 10 {
		t.Fatalf("read %d public packages; want them all", n)
	}
}

func isInternal(pkg string) bool {
	return strings.HasSuffix(pkg, "/internal") || strings.Contains(pkg, "/internal/")
}

// internalTypesInAPI parses one file and returns, for each exported
// declaration that names a type of an internal package, where and which.
func internalTypesInAPI(t *testing.T, file string) []string {
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	internal := map[string]string{} // local name -> import path
	for _, imp := range af.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !isInternal(path) {
			continue
		}
		name := filepath.Base(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		internal[name] = path
	}
	if len(internal) == 0 {
		return nil
	}
	var found []string
	check := func(what string, n ast.Node) {
		if n == nil {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok {
					if path, ok := internal[id.Name]; ok {
						found = append(found, fset.Position(sel.Pos()).String()+": "+what+" names "+path+"."+sel.Sel.Name)
					}
				}
			}
			// Function bodies and unexported fields are not API.
			switch n := n.(type) {
			case *ast.BlockStmt:
				return false
			case *ast.Field:
				if len(n.Names) > 0 && !anyExported(n.Names) {
					return false
				}
			}
			return true
		})
	}
	for _, d := range af.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
				continue
			}
			check("func "+d.Name.Name, d.Type)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						check("type "+s.Name.Name, s.Type)
					}
				case *ast.ValueSpec:
					if anyExported(s.Names) {
						check("var or const "+s.Names[0].Name, s.Type)
					}
				}
			}
		}
	}
	return found
}

func anyExported(ids []*ast.Ident) bool {
	for _, id := range ids {
		if id.IsExported() {
			return true
		}
	}
	return false
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(recv *ast.FieldList) bool {
	if len(recv.List) == 0 {
		return false
	}
	x := recv.List[0].Type
	for {
		switch e := x.(type) {
		case *ast.StarExpr:
			x = e.X
		case *ast.IndexExpr:
			x = e.X
		case *ast.IndexListExpr:
			x = e.X
		case *ast.Ident:
			return e.IsExported()
		default:
			return false
		}
	}
}
