package sql_test

import (
	dbsql "database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/backends/sql/mysql"
	"github.com/batonhq/baton/backends/sql/postgres"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
)

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	db := &dbsql.DB{} // never used: Validate does no I/O
	ok := sql.Config{DB: db, Table: "baton_lease", Election: "jobs"}
	tests := []struct {
		name string
		mod  func(*sql.Config)
		drv  sql.Driver // zero: PostgreSQL without LISTEN
		want []string   // substrings of the error, each naming field and value; nil: valid
	}{
		{"defaults", func(*sql.Config) {}, sql.Driver{}, nil},
		{"schema-qualified", func(c *sql.Config) { c.Table = "ops.leader_lease" }, sql.Driver{}, nil},
		{"mysql", func(*sql.Config) {}, mysql.Driver(), nil},
		{"listen on postgres", func(*sql.Config) {}, postgres.Driver(postgres.ListenDSN("postgres://x")), nil},
		{"1s TTL", func(c *sql.Config) { c.Timing.TTL = time.Second; c.Timing.SafetyMargin = 200 * time.Millisecond }, sql.Driver{}, nil},
		{"fractional TTL", func(c *sql.Config) { c.Timing.TTL = 2500 * time.Millisecond }, sql.Driver{}, nil},
		{"everything wrong", func(c *sql.Config) {
			*c = sql.Config{Table: "x; DROP TABLE y", PollInterval: -time.Second,
				QueryTimeout: -1, History: -3, Timing: election.Timing{TTL: 500 * time.Millisecond}}
		}, sql.Driver{}, []string{
			"DB <nil>: required",
			`Table "x; DROP TABLE y": not a safe SQL identifier`,
			"Election: required",
			"TTL 500ms: below the backend minimum 1s",
			"PollInterval -1s: must be positive",
			"QueryTimeout -1ns: must be positive",
			"History -3: must be positive",
		}},
		{"missing table", func(c *sql.Config) { c.Table = "" }, sql.Driver{}, []string{"Table: required"}},
		{"uppercase table", func(c *sql.Config) { c.Table = "Leases" }, sql.Driver{}, []string{`Table "Leases": not a safe SQL identifier`}},
		{"quoted table", func(c *sql.Config) { c.Table = `"leases"` }, sql.Driver{}, []string{`Table "\"leases\"": not a safe`}},
		{"three parts", func(c *sql.Config) { c.Table = "a.b.c" }, sql.Driver{}, []string{`Table "a.b.c"`}},
		{"long table", func(c *sql.Config) { c.Table = strings.Repeat("a", 49) }, sql.Driver{}, []string{`Table "aaaa`, "at most 48"}},
		{"long election", func(c *sql.Config) { c.Election = strings.Repeat("é", 256) }, sql.Driver{}, []string{"Election \"ééé", "256 characters, at most 255"}},
		{"renew too slow", func(c *sql.Config) {
			c.Timing = election.Timing{TTL: 3 * time.Second, RenewInterval: 2 * time.Second}
		}, sql.Driver{},
			[]string{"TTL 3s: must be greater than 2*RenewInterval (4s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			drv := tt.drv
			if drv.Dialect == 0 {
				drv = postgres.Driver(nil)
			}
			before := c
			err := c.Validate()
			envtest.WantErrors(t, err, tt.want)
			if tt.want == nil {
				if _, err := sql.New(c, drv); err != nil {
					t.Fatalf("New() = %v", err)
				}
				if c.PollInterval != before.PollInterval || c.Timing != before.Timing {
					t.Fatal("Validate mutated the config")
				}
				return
			}
			if _, nerr := sql.New(c, drv); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New() error = %v, want the Validate error", nerr)
			}
		})
	}
}

// TestNew_Driver: New checks the Driver too, and reports its problems
// with the Config's, all at once. (The dialect packages cannot build a
// wrong Driver: mysql.Config has no Listen field.)
func TestNew_Driver(t *testing.T) {
	t.Parallel()
	ok := sql.Config{DB: &dbsql.DB{}, Table: "baton_lease", Election: "jobs"}
	tests := []struct {
		name string
		cfg  sql.Config
		drv  sql.Driver
		want []string
	}{
		{"missing dialect and table", sql.Config{DB: ok.DB, Election: "jobs"}, sql.Driver{}, []string{"Driver.Dialect: required", "Table: required"}},
		{"unknown dialect", ok, sql.Driver{Dialect: 7}, []string{"Driver.Dialect Dialect(7): unknown"}},
		{"listen on mysql", ok, sql.Driver{Dialect: sql.MySQL, Listen: postgres.Driver(postgres.ListenDSN("x")).Listen},
			[]string{"Listen: set, but LISTEN/NOTIFY is PostgreSQL only (Dialect mysql)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sql.New(tt.cfg, tt.drv)
			envtest.WantErrors(t, err, tt.want)
		})
	}
}

func TestSchemaSQL(t *testing.T) {
	t.Parallel()
	for _, d := range []sql.Dialect{sql.Postgres, sql.MySQL} {
		stmts, err := sql.SchemaSQL(d, "ops.leader")
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(stmts, "\n")
		if strings.Contains(all, "baton_lease") || !strings.Contains(all, "ops.leader_ticks") || !strings.Contains(all, "ops.leader_runs") ||
			!strings.Contains(all, "ops.leader_control") {
			t.Errorf("%v: placeholder not replaced:\n%s", d, all)
		}
		want := 5 // the lease, its token counter, ticks, runs, the control store
		if d == sql.Postgres {
			want += 2 // the control store's version sequence; the upgrade adding runs.attempts (MySQL: EnsureSchema's addColumn)
		}
		if len(stmts) != want {
			t.Errorf("%v: %d statements, want %d", d, len(stmts), want)
		}
	}
	if _, err := sql.SchemaSQL(sql.MySQL, "x;y"); err == nil {
		t.Error("SchemaSQL accepted an unsafe table name")
	}
	// The dialect packages return the same statements.
	for d, f := range map[sql.Dialect]func(string) ([]string, error){sql.Postgres: postgres.SchemaSQL, sql.MySQL: mysql.SchemaSQL} {
		got, err := f("ops.leader")
		want, werr := sql.SchemaSQL(d, "ops.leader")
		if err != nil || werr != nil || !slices.Equal(got, want) {
			t.Errorf("%v: SchemaSQL = %q, %v; want sql.SchemaSQL's %q, %v", d, got, err, want, werr)
		}
	}
}
