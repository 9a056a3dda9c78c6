package readme_test

import (
	"bufio"
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/schedulerhost"
)

func sendReport(ctx context.Context, token uint64) error { return nil }

// Example_library is the library example of docs/configuration.md ("By
// hand"): an etcd election and one nightly job. It is compiled, not run.
func Example_library() {
	// README:begin
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	backend, err := etcd.New(etcd.Config{Client: cli, Prefix: "/baton/elections/reports"})
	if err != nil {
		log.Fatal(err)
	}
	hostname, _ := os.Hostname()
	id := fmt.Sprintf("%s-%d", hostname, os.Getpid()) // unique per process, as baton run's default
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs: []schedulerhost.Job{{
			Name:     "nightly-report",
			Schedule: "0 2 * * *", // 02:00 UTC
			Run: func(ctx context.Context) error {
				token, _ := election.TokenFromContext(ctx) // fencing token of this term
				return sendReport(ctx, token)              // e.g. UPDATE ... WHERE last_token <= $token
			},
		}},
		Ledger:   backend.Ledger(), // once per tick, catch-up after failover, history
		Instance: id,
	})
	if err != nil {
		log.Fatal(err)
	}
	elector, err := election.New(election.Config{Backend: backend, Identity: election.Identity{ID: id}})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Campaigns; while leading runs the jobs; on SIGTERM drains, releases, returns.
	if err := elector.Run(ctx, host.Lead); err != nil {
		log.Fatal(err)
	}
	// README:end
}

// TestREADMEShowsExample checks that docs/configuration.md ("By hand")
// contains the code between the README markers above, verbatim (one tab
// of indentation removed).
func TestREADMEShowsExample(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	begin := strings.Index(s, "// README:begin\n")
	end := strings.Index(s, "\t// README:end")
	if begin < 0 || end < begin {
		t.Fatal("README markers not found")
	}
	var lines []string
	for _, l := range strings.Split(s[begin+len("// README:begin\n"):end], "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	want := strings.Join(lines, "\n")
	if !strings.Contains(string(readme), want) {
		t.Errorf("docs/configuration.md does not show the example verbatim; it should contain:\n%s", want)
	}
}

// backendNames is how the docs name each backend package. A new backend
// needs a row here, and its names where the row says.
var backendNames = map[string]backendDoc{
	"backends/etcd":         {front: []string{"etcd"}, pkgDoc: []string{"etcd"}, kind: "etcd", code: "backends/etcd"},
	"backends/consul":       {front: []string{"Consul"}, pkgDoc: []string{"Consul"}, kind: "consul", code: "backends/consul"},
	"backends/redis":        {front: []string{"Redis"}, pkgDoc: []string{"Redis"}, kind: "redis", code: "backends/redis"},
	"backends/sql/postgres": {front: []string{"PostgreSQL"}, pkgDoc: []string{"PostgreSQL"}, kind: "postgres", code: "backends/sql"},
	"backends/sql/mysql":    {front: []string{"MySQL/MariaDB"}, pkgDoc: []string{"MySQL/MariaDB"}, kind: "mysql", code: "backends/sql"},
	"backends/memory":       {front: []string{"in memory"}, pkgDoc: []string{"backends/memory"}}, // for tests: no kind, not in the guarantee rows
	"backends/kube":         {front: []string{"Kubernetes Lease"}, pkgDoc: []string{"Kubernetes"}, kind: "kube", code: "backends/kube"},
	"backends/sql":          {code: "backends/sql"}, // the dialects name it
}

// backendDoc is how the docs name one backend package.
type backendDoc struct {
	front  []string // in the README's first paragraph
	pkgDoc []string // in the root package's comment (doc.go)
	kind   string   // in the README's sidecar config: backend.kind and its comment
	code   string   // the folder rows 2 (fencing token) and 3 (once per tick) of docs/ARCHITECTURE.md's guarantee table point into
}

// TestREADME_Front checks the README's size (at most 300 lines) and that
// every backend package (go list backends/...) is named where
// backendNames says: in the README's first paragraph, in the root
// package's comment, among the kinds of the README's sidecar config
// (`kind: etcd  # or ...`), and in the rows of docs/ARCHITECTURE.md's
// guarantee table that say where each backend makes its fencing token and
// checks its claims.
func TestREADME_Front(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "\n"); n > 300 {
		t.Errorf("README.md has %d lines, want at most 300", n)
	}
	para := firstParagraph(text)
	pkgDoc := rootPackageDoc(t, root)
	kinds := sidecarKinds(t, text)
	arch, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := guaranteeRows(t, string(arch), "2. Fencing token", "3. Once per tick")
	out, err := exec.Command("go", "list", "github.com/batonhq/baton/backends/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	n := 0
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(pkg, "github.com/batonhq/baton/")
		names, ok := backendNames[rel]
		if !ok {
			t.Errorf("%s: a backend package with no row in backendNames", rel)
			continue
		}
		n++
		for _, name := range names.front {
			if !strings.Contains(para, name) {
				t.Errorf("README's first paragraph does not name %q (%s):\n%s", name, rel, para)
			}
		}
		for _, name := range names.pkgDoc {
			if !strings.Contains(pkgDoc, name) {
				t.Errorf("the root package's comment does not name %q (%s):\n%s", name, rel, pkgDoc)
			}
		}
		if names.kind != "" && !kinds[names.kind] {
			t.Errorf("README's sidecar config does not name the kind %q (%s) in `kind: ... # or ...`", names.kind, rel)
		}
		for title, row := range rows {
			if names.code != "" && !strings.Contains(row, names.code) {
				t.Errorf("docs/ARCHITECTURE.md's guarantee row %q does not point into %s (%s)", title, names.code, rel)
			}
		}
	}
	if n < 6 {
		t.Errorf("go list found %d backend packages, want at least 6", n)
	}
}

// rootPackageDoc is the root package's comment, its words joined by one
// space. Exactly one of the package's files may carry it.
func rootPackageDoc(t *testing.T, root string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var docs, in []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if af.Doc != nil {
			docs = append(docs, strings.Join(strings.Fields(af.Doc.Text()), " "))
			in = append(in, filepath.Base(f))
		}
	}
	if len(docs) != 1 {
		t.Fatalf("the root package's comment is in %d files (%v), want 1", len(docs), in)
	}
	return docs[0]
}

// sidecarKinds returns the backend kinds the README's sidecar config
// names on its `kind:` line: the value and the words of its comment.
func sidecarKinds(t *testing.T, readme string) map[string]bool {
	t.Helper()
	for _, line := range strings.Split(readme, "\n") {
		value, comment, ok := strings.Cut(strings.TrimSpace(line), "#")
		if !ok || !strings.HasPrefix(value, "kind:") {
			continue
		}
		kinds := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.TrimPrefix(value, "kind:")+" "+comment, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		}) {
			kinds[w] = true
		}
		return kinds
	}
	t.Fatal("README.md: no `kind: ... # or ...` line in the sidecar config")
	return nil
}

// guaranteeRows returns the rows of docs/ARCHITECTURE.md's table "Where
// each guarantee is enforced" whose first cell is one of titles.
func guaranteeRows(t *testing.T, arch string, titles ...string) map[string]string {
	t.Helper()
	_, table, ok := strings.Cut(arch, "\n## Where each guarantee is enforced\n")
	if !ok {
		t.Fatal("docs/ARCHITECTURE.md: no section \"Where each guarantee is enforced\"")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	rows := map[string]string{}
	for _, title := range titles {
		for _, line := range strings.Split(table, "\n") {
			if strings.HasPrefix(line, "| "+title+" |") {
				rows[title] = line
			}
		}
		if rows[title] == "" {
			t.Fatalf("docs/ARCHITECTURE.md: the guarantee table has no row %q", title)
		}
	}
	return rows
}

// firstParagraph is the README's text from the line after the title to
// the first blank line after some text, joined into one line.
func firstParagraph(text string) string {
	var words []string
	for i, line := range strings.Split(text, "\n") {
		if i == 0 || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			if len(words) > 0 {
				break
			}
			continue
		}
		words = append(words, strings.Fields(line)...)
	}
	return strings.Join(words, " ")
}

// firstBlock returns the README's first fenced code block: its language
// and its text.
func firstBlock(t *testing.T) (lang, code string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n```")
	if i < 0 {
		t.Fatal("README.md: no code block")
	}
	s = s[i+len("\n```"):]
	nl := strings.Index(s, "\n")
	lang, s = s[:nl], s[nl+1:]
	j := strings.Index(s, "\n```")
	if j < 0 {
		t.Fatal("README.md: its first code block does not end")
	}
	return lang, s[:j+1]
}

// TestREADME_FirstProgram: the README's first code block is the program
// in testdata/firstprogram, verbatim; it builds, and run against a real
// etcd it leads, runs its job, and stops cleanly on SIGTERM.
func TestREADME_FirstProgram(t *testing.T) {
	lang, code := firstBlock(t)
	want, err := os.ReadFile(filepath.Join("testdata", "firstprogram", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if lang != "go" || code != string(want) {
		t.Fatalf("README.md's first code block (```%s, %d lines) is not testdata/firstprogram/main.go verbatim", lang, strings.Count(code, "\n"))
	}
	lines := strings.Count(code, "\n")
	if lines > 20 {
		t.Errorf("README.md's first code block: %d lines, want at most 20", lines)
	}
	t.Logf("the README's first code block: a complete program of %d lines", lines)

	bin := filepath.Join(t.TempDir(), "firstprogram")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/firstprogram").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv := etcdtest.Start(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ETCD_ENDPOINT="+srv.Endpoint())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ran := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		closed := false
		for sc.Scan() {
			if !closed && strings.Contains(sc.Text(), "report sent") {
				close(ran)
				closed = true
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the program's job did not run within 30 s")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM the program exited with %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the program did not stop within 30 s of SIGTERM")
	}
}
