package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMutants(t *testing.T) {
	src := `package p

import "time"

func f(a, b int, x, y time.Time) bool {
	if a < b && !x.Before(y) {
		return true
	}
	switch {
	case a == b:
		return false
	}
	return a >= b || y.After(x)
}
`
	p := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ms, err := mutants(p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		b := []byte(src)
		got = append(got, string(b[:m.from])+m.repl+string(b[m.to:]))
	}
	for _, want := range []string{
		"if true {", "if false {", // the if's condition
		"if a <= b && !x.Before(y) {", "if a < b || !x.Before(y) {", "if a < b && x.Before(y) {", "if a < b && !x.After(y) {",
		"case true:", "case false:", "case a != b:",
		"return a > b || y.After(x)", "return a >= b && y.After(x)", "return a >= b || y.Before(x)",
	} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("no mutant with %q", want)
		}
	}
	if len(ms) != len(got) || len(ms) != 12 {
		t.Errorf("%d mutants, want 12 (the ones above)", len(ms))
	}
}
