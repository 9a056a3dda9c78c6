package metrics

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// The closed set of reasons the metric has a series for is audit's: every
// constant of type Reason in audit/class.go, each once.
func TestTickReasons_AreAuditsReasons(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../audit/class.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Reason" {
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok {
					consts = append(consts, lit.Value[1:len(lit.Value)-1])
				}
			}
		}
		return true
	})
	var ours []string
	for _, cr := range tickReasons {
		ours = append(ours, string(cr.reason))
	}
	slices.Sort(consts)
	slices.Sort(ours)
	if len(consts) < 10 || !slices.Equal(consts, ours) {
		t.Errorf("audit/class.go's reasons %v, tickReasons %v: want the same", consts, ours)
	}
}
