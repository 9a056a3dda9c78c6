// Package depcheck holds tests that keep the core packages free of
// backend SDKs (the dependency direction is backends -> election, never
// the other way) and each SQL dialect free of the other's driver.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

func TestCorePackagesImportNoBackendSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps",
		"github.com/batonhq/baton/election",
		"github.com/batonhq/baton/schedulerhost").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	banned := []string{"go.etcd.io/", "github.com/hashicorp/consul", "github.com/jackc/pgx", "github.com/go-sql-driver/", "database/sql", "github.com/batonhq/baton/backends/"}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		for _, b := range banned {
			if strings.HasPrefix(d, b) {
				t.Errorf("election or schedulerhost depends on %s", d)
			}
		}
	}
	t.Logf("election and schedulerhost: %d packages in their dependency closure, none from a backend SDK", len(deps))
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
