// Command mutate measures how well a package's tests guard its
// conditions: it makes one small change at a time to the package's
// source (a mutant), runs the package's tests against it through
// `go test -overlay` (the working tree is never written), and counts the
// mutants the tests kill. A mutant that survives is a change of a rule
// that no test notices.
//
// The changes: a condition of an if or a case made true, or false; && and
// || swapped; a comparison moved by its boundary (< and <=, > and >=) or
// turned (== and !=); a ! dropped; Before and After swapped. A mutant
// that does not compile is counted apart and not scored.
//
// Usage, from the repository root (make mutate):
//
//	go run ./tools/mutate [-parallel N] [-timeout D] PKGDIR FILE...
//
// It prints one line per surviving mutant and the score, and exits 0
// whatever the score: the figure is for the reader.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// mutant is one change to one file: the bytes [from, to) of src become
// repl.
type mutant struct {
	file     string // path as given
	src      []byte // the file as it was when the run began
	line     int
	from, to int
	repl     string
	what     string // for the report: "`a < b` → `a <= b`"
}

// outcome of running the tests against a mutant.
type outcome int

const (
	killed outcome = iota
	survived
	noBuild
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	parallel := fs.Int("parallel", 2, "mutants tested at once")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on one test run (a run over it counts as killed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		return errors.New("usage: mutate [-parallel N] [-timeout D] PKGDIR FILE...")
	}
	if *parallel < 1 {
		return fmt.Errorf("-parallel %d: want at least 1", *parallel)
	}
	pkg := fs.Arg(0)
	var all []mutant
	for _, f := range fs.Args()[1:] {
		ms, err := mutants(f)
		if err != nil {
			return err
		}
		all = append(all, ms...)
	}
	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Every Go file of the package as it is now, so that edits made to
	// the working tree while the run goes on change nothing.
	base, err := snapshot(pkg, filepath.Join(tmp, "base"))
	if err != nil {
		return err
	}

	// The tests must pass on the source as it is, or no figure means
	// anything.
	if o, text := test(ctx, pkg, overlay(filepath.Join(tmp, "base.json"), base), *timeout); o != survived {
		return fmt.Errorf("the tests of %s do not pass on the unchanged source:\n%s", pkg, text)
	}
	results := make([]outcome, len(all))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range *parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = try(ctx, pkg, filepath.Join(tmp, fmt.Sprint(w)), base, all[i], *timeout)
			}
		}()
	}
	for i := range all {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err() // stopped: no figure
	}
	// Only the Go files are snapshotted: a file the tests read (a fuzz
	// corpus entry written meanwhile) can make every run fail, and every
	// mutant look killed. The unchanged source must still pass.
	if o, text := test(ctx, pkg, overlay(filepath.Join(tmp, "base.json"), base), *timeout); o != survived {
		return fmt.Errorf("the tests of %s stopped passing on the unchanged source during the run (a test data file changed?), so no figure:\n%s", pkg, text)
	}

	var n [3]int
	var lost []mutant
	for i, o := range results {
		n[o]++
		if o == survived {
			lost = append(lost, all[i])
		}
	}
	sort.SliceStable(lost, func(i, j int) bool {
		if lost[i].file != lost[j].file {
			return lost[i].file < lost[j].file
		}
		return lost[i].line < lost[j].line
	})
	for _, m := range lost {
		fmt.Fprintf(out, "survived: %s:%d: %s\n", m.file, m.line, m.what)
	}
	scored := n[killed] + n[survived]
	pct := 0.0
	if scored > 0 {
		pct = 100 * float64(n[killed]) / float64(scored)
	}
	fmt.Fprintf(out, "mutate: %d mutants of %s: %d killed, %d survived, %d did not compile; score %.1f%%\n",
		len(all), strings.Join(fs.Args()[1:], ", "), n[killed], n[survived], n[noBuild], pct)
	return nil
}

// try writes m's file to dir and runs the tests with it in place of the
// original, and the other files of the package as in base.
func try(ctx context.Context, pkg, dir string, base map[string]string, m mutant, timeout time.Duration) outcome {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return noBuild
	}
	mut := append(append(append([]byte{}, m.src[:m.from]...), m.repl...), m.src[m.to:]...)
	abs, err := filepath.Abs(m.file)
	if err != nil {
		return noBuild
	}
	mf := filepath.Join(dir, filepath.Base(m.file))
	if err := os.WriteFile(mf, mut, 0o644); err != nil {
		return noBuild
	}
	files := map[string]string{}
	for k, v := range base {
		files[k] = v
	}
	files[abs] = mf
	of := overlay(filepath.Join(dir, "overlay.json"), files)
	if of == "" {
		return noBuild
	}
	o, _ := test(ctx, pkg, of, timeout)
	return o
}

// snapshot copies the Go files of dir into to and returns the overlay
// that puts the copies in place of the files: absolute path → copy.
func snapshot(dir, to string) (map[string]string, error) {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(n)
		if err != nil {
			return nil, err
		}
		c := filepath.Join(to, filepath.Base(n))
		if err := os.WriteFile(c, b, 0o644); err != nil {
			return nil, err
		}
		out[abs] = c
	}
	return out, nil
}

// overlay writes go's overlay file for files at path and returns path
// ("" if it could not be written).
func overlay(path string, files map[string]string) string {
	b, err := json.Marshal(map[string]map[string]string{"Replace": files})
	if err != nil || os.WriteFile(path, b, 0o644) != nil {
		return ""
	}
	return path
}

// test runs the tests of pkg, with the overlay file if one is given:
// survived when they pass.
func test(ctx context.Context, pkg, overlay string, timeout time.Duration) (outcome, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := []string{"test", "-count=1"}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./"+filepath.Clean(pkg))...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	text := b.String()
	switch {
	case err == nil:
		return survived, text
	case strings.Contains(text, "[build failed]") || strings.Contains(text, "[setup failed]"):
		return noBuild, text
	default:
		return killed, text
	}
}

// mutants lists the changes mutate makes to file.
func mutants(file string) ([]mutant, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, 0)
	if err != nil {
		return nil, err
	}
	var out []mutant
	text := func(n ast.Node) string {
		return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
	}
	add := func(pos, end token.Pos, repl, what string) {
		p := fset.Position(pos)
		out = append(out, mutant{file: file, src: src, line: p.Line, from: p.Offset, to: fset.Position(end).Offset, repl: repl, what: what})
	}
	cond := func(e ast.Expr) {
		if e == nil {
			return
		}
		t := oneLine(text(e))
		add(e.Pos(), e.End(), "true", fmt.Sprintf("`%s` → `true`", t))
		add(e.Pos(), e.End(), "false", fmt.Sprintf("`%s` → `false`", t))
	}
	swap := map[token.Token]token.Token{
		token.LAND: token.LOR, token.LOR: token.LAND,
		token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR,
		token.EQL: token.NEQ, token.NEQ: token.EQL,
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt:
			cond(n.Cond)
		case *ast.SwitchStmt:
			if n.Tag == nil {
				for _, s := range n.Body.List {
					for _, e := range s.(*ast.CaseClause).List {
						cond(e)
					}
				}
			}
		case *ast.BinaryExpr:
			if to, ok := swap[n.Op]; ok {
				add(n.OpPos, n.OpPos+token.Pos(len(n.Op.String())), to.String(),
					fmt.Sprintf("`%s` → `%s` in `%s`", n.Op, to, oneLine(text(n))))
			}
		case *ast.UnaryExpr:
			if n.Op == token.NOT {
				add(n.OpPos, n.OpPos+1, "", fmt.Sprintf("`%s` → `%s`", oneLine(text(n)), oneLine(text(n.X))))
			}
		case *ast.SelectorExpr:
			if to, ok := map[string]string{"Before": "After", "After": "Before"}[n.Sel.Name]; ok {
				add(n.Sel.Pos(), n.Sel.End(), to, fmt.Sprintf("`%s` → `%s`", oneLine(text(n)), to))
			}
		}
		return true
	})
	return out, nil
}

// oneLine folds white space, and shortens s to a readable length.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 90 {
		s = s[:87] + "..."
	}
	return s
}
