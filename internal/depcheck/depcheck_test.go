// Package depcheck holds tests of the dependency direction: every
// package's imports against the table of docs/ARCHITECTURE.md
// (architecture_test.go); the core packages (election, ledger, control,
// schedulerhost) and httpapi (the HTTP API) import no backend SDK (backends -> election, never the
// other way); no package under election/, driver/ or ledger/ depends on
// schedulerhost, not even in its tests; each SQL dialect links none
// of the other's driver; and the top-level folders of the module, by
// their packages' imports, form no loop (rooms_test.go). Beside them, the
// size rules of the non-test Go files (funclen_test.go): no function over
// 120 lines outside the rigs, no file over 400 lines.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

func TestCorePackagesImportNoBackendSDK(t *testing.T) {
	sdks := []string{"go.etcd.io/", "github.com/hashicorp/consul", "github.com/jackc/pgx", "github.com/go-sql-driver/", "github.com/redis/", "github.com/batonhq/baton/backends/"}
	for _, c := range []struct {
		pkgs   []string
		banned []string
	}{
		// The core does not even link database/sql.
		{[]string{"election", "ledger", "control", "schedulerhost"}, append([]string{"database/sql"}, sdks...)},
		// httpapi, the HTTP API, and the root package baton link
		// database/sql through Prometheus's collectors (the standard
		// library), but no backend.
		{[]string{"httpapi", ""}, sdks}, // "": the root package, baton
		// fence speaks SQL through database/sql, the caller's driver.
		{[]string{"fence"}, sdks},
		// OpenTelemetry is linked by tracing (and what imports it) only:
		// the core and the metrics reach a span through the Tracer hook.
		{[]string{"election", "ledger", "control", "audit", "schedulerhost", "metrics"}, []string{"go.opentelemetry.io/"}},
	} {
		args := []string{"list", "-deps"}
		for _, p := range c.pkgs {
			args = append(args, strings.TrimSuffix("github.com/batonhq/baton/"+p, "/"))
		}
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		deps := strings.Fields(string(out))
		for _, d := range deps {
			for _, b := range c.banned {
				if strings.HasPrefix(d, b) {
					t.Errorf("%v depends on %s", c.pkgs, d)
				}
			}
		}
		t.Logf("%v: %d packages in their dependency closure, none under %v", c.pkgs, len(deps), c.banned)
	}
}

// TestElectionAndLedgerDoNotImportScheduler lists every package under
// election/, driver/ and ledger/ with the dependencies of its tests, and
// fails if any of them reaches schedulerhost.
func TestElectionAndLedgerDoNotImportScheduler(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test",
		"-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`,
		"github.com/batonhq/baton/election/...",
		"github.com/batonhq/baton/driver/...",
		"github.com/batonhq/baton/ledger/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const sched = "github.com/batonhq/baton/schedulerhost"
	n := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n++
		if strings.HasPrefix(f[0], sched) {
			t.Errorf("%s is in the dependency closure of election/..., driver/... or ledger/...", f[0])
		}
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, sched) {
				t.Errorf("%s imports %s", f[0], imp)
			}
		}
	}
	if !t.Failed() {
		t.Logf("election/..., driver/... and ledger/... with their tests: %d packages, none from schedulerhost", n)
	}
}

// TestSQLDialectsLinkOneDriver: importing the MySQL backend links no
// module of pgx's (github.com/jackc/...), importing the PostgreSQL backend
// links no MySQL driver module, and the shared core links neither.
func TestSQLDialectsLinkOneDriver(t *testing.T) {
	const pgx, mysql = "github.com/jackc/", "github.com/go-sql-driver/"
	for _, tt := range []struct {
		pkg    string
		banned []string // module path prefixes
	}{
		{"github.com/batonhq/baton/backends/sql/mysql", []string{pgx}},
		{"github.com/batonhq/baton/backends/sql/postgres", []string{mysql}},
		{"github.com/batonhq/baton/backends/sql", []string{pgx, mysql}},
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", tt.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		mods := map[string]bool{}
		for _, m := range strings.Fields(string(out)) {
			mods[m] = true
		}
		for m := range mods {
			for _, b := range tt.banned {
				if strings.HasPrefix(m, b) {
					t.Errorf("%s links module %s", tt.pkg, m)
				}
			}
		}
		if !mods["github.com/batonhq/baton"] {
			t.Errorf("go list -deps %s names no package of this module: %q", tt.pkg, out)
		}
		t.Logf("%s: %d modules in its dependency closure, none under %v", tt.pkg, len(mods), tt.banned)
	}
}
