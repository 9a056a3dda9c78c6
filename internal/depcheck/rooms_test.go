package depcheck

import (
	"fmt"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The rooms of the module are its top-level folders (election, ledger,
// driver, backends, internal, ...), and the root package is the room
// ".". A package's non-test import of a package in another room is an
// arrow between their rooms; the arrows must form no loop, so that every
// room can be read, built and changed knowing only the rooms below it.

// room is the room of pkg, a package path relative to the module.
func room(pkg string) string {
	if pkg == "." {
		return "."
	}
	r, _, _ := strings.Cut(pkg, "/")
	return r
}

// pkgImport is one import, in a package's non-test files, of a package in
// another room: the evidence of an arrow.
type pkgImport struct{ from, to string } // relative to the module

// loops returns the loops among the rooms of arrows (from room -> to
// rooms): each strongly connected set of two rooms or more, sorted, in
// the order of its least room. An arrow from a room to itself is no loop.
func loops(arrows map[string][]string) [][]string {
	var rooms []string
	seen := map[string]bool{}
	add := func(r string) {
		if !seen[r] {
			seen[r] = true
			rooms = append(rooms, r)
		}
	}
	for from, tos := range arrows {
		add(from)
		for _, to := range tos {
			add(to)
		}
	}
	slices.Sort(rooms)
	// Tarjan's algorithm for strongly connected components.
	index, low, onStack := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack []string
	var found [][]string
	var visit func(r string)
	visit = func(r string) {
		index[r], low[r] = len(index), len(index)
		stack = append(stack, r)
		onStack[r] = true
		tos := slices.Sorted(slices.Values(arrows[r]))
		for _, to := range tos {
			if _, ok := index[to]; !ok {
				visit(to)
				low[r] = min(low[r], low[to])
			} else if onStack[to] {
				low[r] = min(low[r], index[to])
			}
		}
		if low[r] != index[r] {
			return
		}
		var comp []string
		for {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[top] = false
			comp = append(comp, top)
			if top == r {
				break
			}
		}
		if len(comp) > 1 {
			slices.Sort(comp)
			found = append(found, comp)
		}
	}
	for _, r := range rooms {
		if _, ok := index[r]; !ok {
			visit(r)
		}
	}
	slices.SortFunc(found, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return found
}

// cycle returns one way round loop (a result of loops): from its least
// room, by the shortest path of arrows inside the loop, back to it.
func cycle(arrows map[string][]string, loop []string) []string {
	in := map[string]bool{}
	for _, r := range loop {
		in[r] = true
	}
	start := loop[0]
	prev := map[string]string{}
	queue := []string{start}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		for _, to := range slices.Sorted(slices.Values(arrows[r])) {
			if !in[to] || to == r {
				continue
			}
			if to == start {
				path := []string{start}
				for at := r; at != start; at = prev[at] {
					path = append(path, at)
				}
				slices.Reverse(path[1:])
				return append(path, start)
			}
			if _, ok := prev[to]; !ok {
				prev[to] = r
				queue = append(queue, to)
			}
		}
	}
	return nil // not a loop of arrows
}

// listedPackage is what go list says of one package of the module.
type listedPackage struct {
	rel, dir string
	files    []string // non-test Go files, cgo ones included
	imports  []string // non-test imports of the module's packages, relative
}

// listModule lists every package of the module with its non-test files
// and imports.
func listModule(t *testing.T) map[string]listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}}|{{.Dir}}|{{join .GoFiles " "}} {{join .CgoFiles " "}}|{{join .Imports " "}}`,
		module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := map[string]listedPackage{}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "|")
		if len(f) != 4 {
			continue
		}
		p := listedPackage{rel: relative(f[0]), dir: f[1], files: strings.Fields(f[2])}
		for _, imp := range strings.Fields(f[3]) {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				p.imports = append(p.imports, relative(imp))
			}
		}
		pkgs[p.rel] = p
	}
	return pkgs
}

// relative is an import path of the module relative to it: "." for the
// root package.
func relative(importPath string) string {
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}

// importingFiles names the non-test files of p that import to, relative
// to root.
func importingFiles(t *testing.T, root string, p listedPackage, to string) []string {
	t.Helper()
	want := module
	if to != "." {
		want += "/" + to
	}
	var names []string
	for _, name := range p.files {
		file := filepath.Join(p.dir, name)
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, spec := range f.Imports {
			if path, _ := strconv.Unquote(spec.Path.Value); path == want {
				rel, err := filepath.Rel(root, file)
				if err != nil {
					rel = file
				}
				names = append(names, filepath.ToSlash(rel))
			}
		}
	}
	return names
}

// TestNoRoomLoop fails when the rooms of the module (its top-level
// folders, and "." for the root package), joined by the non-test imports
// of their packages, form a loop. It reports each loop with the imports
// that make its arrows, and the files that hold them.
func TestNoRoomLoop(t *testing.T) {
	pkgs := listModule(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list named %d packages of the module; want them all", len(pkgs))
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	arrows := map[string][]string{}
	evidence := map[[2]string][]pkgImport{}
	for _, p := range pkgs {
		for _, imp := range p.imports {
			from, to := room(p.rel), room(imp)
			if from == to {
				continue
			}
			key := [2]string{from, to}
			if len(evidence[key]) == 0 {
				arrows[from] = append(arrows[from], to)
			}
			evidence[key] = append(evidence[key], pkgImport{p.rel, imp})
		}
	}
	found := loops(arrows)
	for _, loop := range found {
		var b strings.Builder
		fmt.Fprintf(&b, "the rooms %s form a loop: %s", strings.Join(loop, ", "), strings.Join(cycle(arrows, loop), " -> "))
		for _, from := range loop {
			for _, to := range loop {
				ev := evidence[[2]string{from, to}]
				slices.SortFunc(ev, func(a, b pkgImport) int {
					return strings.Compare(a.from+" "+a.to, b.from+" "+b.to)
				})
				for _, e := range ev {
					fmt.Fprintf(&b, "\n\t%s -> %s: %s imports %s (%s)", from, to, e.from, e.to,
						strings.Join(importingFiles(t, root, pkgs[e.from], e.to), ", "))
				}
			}
		}
		t.Error(b.String())
	}
	if len(found) == 0 {
		t.Logf("%d packages in %d rooms, %d arrows between rooms: no loop", len(pkgs), len(roomsOf(pkgs)), len(evidence))
	}
}

// roomsOf is the set of rooms of pkgs.
func roomsOf(pkgs map[string]listedPackage) map[string]bool {
	rooms := map[string]bool{}
	for p := range pkgs {
		rooms[room(p)] = true
	}
	return rooms
}

// The loop finder on graphs made up for it: it must find a loop of two
// rooms and one of three, and pass a graph without one.
func TestRoomLoopFinder(t *testing.T) {
	for _, c := range []struct {
		name   string
		arrows map[string][]string
		want   [][]string // loops, each with one way round
	}{
		{
			name:   "two rooms",
			arrows: map[string][]string{"election": {"ledger"}, "ledger": {"election"}, "backends": {"election", "ledger"}},
			want:   [][]string{{"election", "ledger", "election"}},
		},
		{
			name:   "three rooms",
			arrows: map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "a2": {"d"}},
			want:   [][]string{{"a", "b", "c", "a"}},
		},
		{
			name: "two loops beside a DAG",
			arrows: map[string][]string{".": {"node", "election"}, "node": {"internal"}, "internal": {"node", "election"},
				"x": {"y"}, "y": {"z"}, "z": {"x"}},
			want: [][]string{{"internal", "node", "internal"}, {"x", "y", "z", "x"}},
		},
		{
			name: "a DAG",
			arrows: map[string][]string{".": {"driver", "election", "ledger", "node"}, "driver": {"election", "ledger", "control"},
				"ledger": {"election"}, "control": {"ledger"}, "node": {"election", "ledger"}, "internal": {".", "node", "driver"}},
		},
		{
			name:   "a room's arrow to itself",
			arrows: map[string][]string{"a": {"a", "b"}},
		},
		{
			name:   "a loop through a room with an arrow to itself",
			arrows: map[string][]string{"a": {"a", "b"}, "b": {"a"}},
			want:   [][]string{{"a", "b", "a"}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got [][]string
			for _, l := range loops(c.arrows) {
				got = append(got, cycle(c.arrows, l))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("loops: %v, want %v", got, c.want)
			}
		})
	}
	if room(".") != "." || room("election") != "election" || room("internal/execjob/killtest") != "internal" {
		t.Error("room: the root package is the room \".\", any other the first element of its path")
	}
}
