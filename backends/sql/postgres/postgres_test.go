package postgres_test

import (
	dbsql "database/sql"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/backends/sql/postgres"
	"github.com/batonhq/baton/election"
)

// TestNew_Config: postgres.New hands every field of its Config to the
// core and reports the core's validation errors unchanged.
func TestNew_Config(t *testing.T) {
	t.Parallel()
	cfg := postgres.Config{DB: &dbsql.DB{}, Table: "ops.leader", Election: "jobs",
		Timing: election.Timing{TTL: 7 * time.Second}, Listen: postgres.ListenDSN("postgres://x")}
	b, err := postgres.New(cfg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if got := b.Timing().TTL; got != 7*time.Second {
		t.Errorf("Timing().TTL = %v, want 7s", got)
	}
	if cfg.PollInterval != 0 || cfg.QueryTimeout != 0 {
		t.Error("New mutated the config")
	}
	bad := postgres.Config{Table: "X", PollInterval: -1}
	verr := bad.Validate()
	_, nerr := postgres.New(bad)
	if verr == nil || nerr == nil || verr.Error() != nerr.Error() {
		t.Fatalf("Validate() = %v, New() = %v; want the same error", verr, nerr)
	}
	core := sql.Config{Table: "X", PollInterval: -1}
	if want := core.Validate(); want == nil || verr.Error() != want.Error() {
		t.Errorf("Validate() = %v, want sql.Config's %v", verr, want)
	}
}
