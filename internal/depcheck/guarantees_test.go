package depcheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/ARCHITECTURE.md's table "Where each guarantee is enforced" names
// the guarantees of docs/guarantees.md and, for each, the files and the
// declarations that enforce it. These tests check that the table lists
// exactly the guarantees of that page, that every file it names exists,
// and that every `file.go` `Name` pair names a declaration of that file,
// so that a guarantee added, a file moved or a function renamed without
// the table fails.

// guaranteeHeading is a numbered guarantee of docs/guarantees.md.
var guaranteeHeading = regexp.MustCompile(`(?m)^## (\d+\. [^\n]+)$`)

// guaranteeRow is a row of the table: its first cell and the rest.
var guaranteeRow = regexp.MustCompile(`(?m)^\| (\d+\. [^|]+?) \| (.+) \|$`)

// goFileRef is a backticked Go file in a row.
var goFileRef = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`")

// declRef is a name a row may pair with a file: Name, (*T).Name,
// (T).Name or T.Name.
var declRef = regexp.MustCompile(`^(\(\*?[A-Za-z_]\w*\)\.|[A-Za-z_]\w*\.)?[A-Za-z_]\w*$`)

// guaranteeRows returns the table's rows (first cell, then the rest) in
// doc, with their lines.
func guaranteeRows(doc string) (names []string, cells []string, lines []int) {
	i := strings.Index(doc, "\n## Where each guarantee is enforced\n")
	if i < 0 {
		return nil, nil, nil
	}
	sec := doc[i:]
	if j := strings.Index(sec[1:], "\n## "); j >= 0 {
		sec = sec[:j+1]
	}
	first := strings.Count(doc[:i], "\n") + 1
	for _, m := range guaranteeRow.FindAllStringSubmatchIndex(sec, -1) {
		names = append(names, sec[m[2]:m[3]])
		cells = append(cells, sec[m[4]:m[5]])
		lines = append(lines, first+strings.Count(sec[:m[0]], "\n"))
	}
	return names, cells, lines
}

// topDecls returns the names file declares at top level, as a row may
// write them: functions, Recv.Name, (Recv).Name and the bare names of
// methods, types, constants and variables.
func topDecls(file string) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			names[d.Name.Name] = true
			if d.Recv != nil && len(d.Recv.List) > 0 {
				r := recvName(d.Recv.List[0].Type)
				names[fmt.Sprintf("(%s).%s", r, d.Name.Name)] = true
				names[strings.TrimPrefix(r, "*")+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	return names, nil
}

// checkGuaranteeCell returns what is wrong with one row's files and
// names, below the module's root; line is the row's line in the doc.
func checkGuaranteeCell(root, cell string, line int) []error {
	var errs []error
	dir := ""
	for _, m := range goFileRef.FindAllStringSubmatchIndex(cell, -1) {
		file := cell[m[2]:m[3]]
		if strings.Contains(file, "/") {
			dir = path.Dir(file)
		} else if dir != "" {
			file = dir + "/" + file // a file beside the one named before
		}
		full := filepath.Join(root, filepath.FromSlash(file))
		if _, err := os.Stat(full); err != nil {
			errs = append(errs, fmt.Errorf("docs/ARCHITECTURE.md:%d: `%s`: no such file", line, file))
			continue
		}
		rest := strings.TrimLeft(cell[m[1]:], " \n")
		if !strings.HasPrefix(rest, "`") {
			continue // a file named alone
		}
		end := strings.Index(rest[1:], "`")
		name := rest[1 : end+1]
		if !declRef.MatchString(name) || strings.HasSuffix(name, ".go") {
			continue // a phrase or another file, not a declaration
		}
		decls, err := topDecls(full)
		if err != nil {
			errs = append(errs, fmt.Errorf("docs/ARCHITECTURE.md:%d: `%s`: %v", line, file, err))
			continue
		}
		if !decls[name] {
			errs = append(errs, fmt.Errorf("docs/ARCHITECTURE.md:%d: `%s` declares no `%s`", line, file, name))
		}
	}
	return errs
}

// TestArchitecture_GuaranteeTable: the table names the guarantees of
// docs/guarantees.md, each once and in order, and every file and
// declaration it names exists.
func TestArchitecture_GuaranteeTable(t *testing.T) {
	root := filepath.Join("..", "..")
	arch, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(filepath.Join(root, "docs", "guarantees.md"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range guaranteeHeading.FindAllStringSubmatch(string(g), -1) {
		want = append(want, m[1])
	}
	if len(want) < 8 {
		t.Fatalf("docs/guarantees.md: %d numbered guarantees, want 8 or more", len(want))
	}
	names, cells, lines := guaranteeRows(string(arch))
	if !slices.Equal(names, want) {
		t.Errorf("docs/ARCHITECTURE.md's guarantee table lists %q; docs/guarantees.md has %q", names, want)
	}
	pairs := 0
	for i, cell := range cells {
		for _, err := range checkGuaranteeCell(root, cell, lines[i]) {
			t.Error(err)
		}
		pairs += len(goFileRef.FindAllString(cell, -1))
	}
	if pairs < 20 {
		t.Errorf("the guarantee table names %d Go files, want 20 or more", pairs)
	}
}

// The checker itself: a wrong name, a missing file and a guarantee left
// out are each caught.
func TestArchitecture_GuaranteeTableRefusesWrongNames(t *testing.T) {
	root := filepath.Join("..", "..")
	for cell, want := range map[string]string{
		"`schedulerhost/pipeline.go` `gateStepp` (a typo)":    "declares no `gateStepp`",
		"`schedulerhost/pipelines.go` `gateStep`":             "no such file",
		"`schedulerhost/drain.go` `(*termRun).drainn`":        "declares no",
		"`schedulerhost/loop.go`, `catchupp.go` `skipOver`":   "`schedulerhost/catchupp.go`: no such file",
		"`backends/consul/config.go` `MinLockDelayy` (const)": "declares no `MinLockDelayy`",
	} {
		errs := checkGuaranteeCell(root, cell, 1)
		if len(errs) == 0 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("cell %q: errors %v, want one saying %q", cell, errs, want)
		}
	}
	for _, cell := range []string{
		"`schedulerhost/pipeline.go` `gateStep` (`Term.Check` right before)",
		"`schedulerhost/clock.go` `schedClock.read`; `schedulerhost/loop.go`, `catchup.go` `skipOver`",
		"`backends/consul/config.go` `MinLockDelay`",
		"`httpapi/api.go` `Healthy`",
	} {
		if errs := checkGuaranteeCell(root, cell, 1); len(errs) > 0 {
			t.Errorf("cell %q: %v, want none", cell, errs)
		}
	}
	_, _, lines := guaranteeRows("# x\n\n## Where each guarantee is enforced\n\n| g | f |\n|---|---|\n| 1. Single starter | `a.go` |\n")
	if len(lines) != 1 || lines[0] != 7 {
		t.Errorf("guaranteeRows: lines %v, want [7]", lines)
	}
}
