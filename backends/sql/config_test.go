package sqlrow_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/sqlrow"
	"github.com/batonhq/baton/election"
)

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	db := &sql.DB{} // never used: Validate does no I/O
	ok := sqlrow.Config{DB: db, Dialect: sqlrow.Postgres, Table: "baton_lease", Election: "jobs"}
	tests := []struct {
		name string
		mod  func(*sqlrow.Config)
		want []string // substrings of the error, each naming field and value; nil: valid
	}{
		{"defaults", func(*sqlrow.Config) {}, nil},
		{"schema-qualified", func(c *sqlrow.Config) { c.Table = "ops.leader_lease" }, nil},
		{"mysql", func(c *sqlrow.Config) { c.Dialect = sqlrow.MySQL }, nil},
		{"listen on postgres", func(c *sqlrow.Config) { c.Listen = sqlrow.ListenDSN("postgres://x") }, nil},
		{"1s TTL", func(c *sqlrow.Config) { c.Timing.TTL = time.Second; c.Timing.SafetyMargin = 200 * time.Millisecond }, nil},
		{"fractional TTL", func(c *sqlrow.Config) { c.Timing.TTL = 2500 * time.Millisecond }, nil},
		{"everything wrong", func(c *sqlrow.Config) {
			*c = sqlrow.Config{Dialect: 7, Table: "x; DROP TABLE y", PollInterval: -time.Second,
				QueryTimeout: -1, History: -3, Timing: election.Timing{TTL: 500 * time.Millisecond}}
		}, []string{
			"DB: required",
			"Dialect Dialect(7): unknown",
			`Table "x; DROP TABLE y": not a safe SQL identifier`,
			"Election: required",
			"TTL 500ms: below the backend minimum 1s",
			"PollInterval -1s: must be positive",
			"QueryTimeout -1ns: must be positive",
			"History -3: must be positive",
		}},
		{"missing dialect and table", func(c *sqlrow.Config) { c.Dialect = 0; c.Table = "" },
			[]string{"Dialect: required", "Table: required"}},
		{"uppercase table", func(c *sqlrow.Config) { c.Table = "Leases" }, []string{`Table "Leases": not a safe SQL identifier`}},
		{"quoted table", func(c *sqlrow.Config) { c.Table = `"leases"` }, []string{`Table "\"leases\"": not a safe`}},
		{"three parts", func(c *sqlrow.Config) { c.Table = "a.b.c" }, []string{`Table "a.b.c"`}},
		{"long table", func(c *sqlrow.Config) { c.Table = strings.Repeat("a", 49) }, []string{`Table "aaaa`, "at most 48"}},
		{"long election", func(c *sqlrow.Config) { c.Election = strings.Repeat("é", 256) }, []string{"Election \"ééé", "256 characters, at most 255"}},
		{"renew too slow", func(c *sqlrow.Config) {
			c.Timing = election.Timing{TTL: 3 * time.Second, RenewInterval: 2 * time.Second}
		},
			[]string{"TTL 3s: must be greater than 2*RenewInterval (4s)"}},
		{"listen on mysql", func(c *sqlrow.Config) { c.Dialect = sqlrow.MySQL; c.Listen = sqlrow.ListenDSN("x") },
			[]string{"Listen: set, but LISTEN/NOTIFY is PostgreSQL only (Dialect mysql)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			before := c
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if _, err := sqlrow.New(c); err != nil {
					t.Fatalf("New() = %v", err)
				}
				if c.PollInterval != before.PollInterval || c.Timing != before.Timing {
					t.Fatal("Validate mutated the config")
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v\nwant it to contain %q", err, w)
				}
			}
			if _, nerr := sqlrow.New(c); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New() error = %v, want the Validate error", nerr)
			}
		})
	}
}

func TestSchemaSQL(t *testing.T) {
	t.Parallel()
	for _, d := range []sqlrow.Dialect{sqlrow.Postgres, sqlrow.MySQL} {
		stmts, err := sqlrow.SchemaSQL(d, "ops.leader")
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(stmts, "\n")
		if strings.Contains(all, "baton_lease") || !strings.Contains(all, "ops.leader_ticks") || !strings.Contains(all, "ops.leader_runs") {
			t.Errorf("%v: placeholder not replaced:\n%s", d, all)
		}
		if want := 4; len(stmts) != want {
			t.Errorf("%v: %d statements, want %d", d, len(stmts), want)
		}
	}
	if _, err := sqlrow.SchemaSQL(sqlrow.MySQL, "x;y"); err == nil {
		t.Error("SchemaSQL accepted an unsafe table name")
	}
}
