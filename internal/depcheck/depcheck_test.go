// Package depcheck holds a test that keeps the core packages free of
// backend SDKs: the dependency direction is backends -> election, never
// the other way.
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
