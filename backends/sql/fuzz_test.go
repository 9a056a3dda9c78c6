package sql

import (
	dbsql "database/sql"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// FuzzConfig: Validate (shared by postgres and mysql) never panics, names
// a field in every problem, and what it accepts has a sane timing
// (backendtest.CheckValidate), a Table that is one or two lowercase
// identifiers short enough for its derived names, an Election of 1 to
// MaxNameLen characters, and no negative PollInterval or QueryTimeout.
func FuzzConfig(f *testing.F) {
	f.Add(true, "baton_lease", "e", int64(0), int64(0), int64(0), int64(0), int64(0), 0)
	f.Add(true, "ops.baton_lease", strings.Repeat("é", 256), int64(1e9), int64(1), int64(1), int64(-1), int64(-1), -1)
	f.Add(false, "Bad-Table", "", int64(3e9), int64(2e9), int64(0), int64(0), int64(0), 0)
	f.Add(true, "a.b.c", "e", int64(5e9), int64(0), int64(0), int64(1), int64(1), 1)
	f.Fuzz(func(t *testing.T, db bool, table, elect string, ttl, renew, margin, poll, query int64, history int) {
		c := Config{Table: table, Election: elect, History: history, PollInterval: time.Duration(poll), QueryTimeout: time.Duration(query),
			Timing: election.Timing{TTL: time.Duration(ttl), RenewInterval: time.Duration(renew), SafetyMargin: time.Duration(margin)}}
		if db {
			c.DB = new(dbsql.DB)
		}
		err := c.Validate()
		r := c.withDefaults()
		backendtest.CheckValidate(t, "sql", err, []string{"DB", "TTL", "RenewInterval", "SafetyMargin", "History", "Table", "Election", "PollInterval", "QueryTimeout"},
			r.Timing, MinTTL, 0)
		if err != nil {
			return
		}
		if r.DB == nil || r.PollInterval < 0 || r.QueryTimeout < 0 || r.History < 0 || r.Election == "" || utf8.RuneCountInString(r.Election) > MaxNameLen {
			t.Fatalf("valid: %+v", r)
		}
		parts := strings.Split(r.Table, ".")
		if len(parts) > 2 {
			t.Fatalf("valid table %q: more than two parts", r.Table)
		}
		for _, p := range parts {
			if p == "" || len(p)+len("_token_seq") > 63 || strings.ToLower(p) != p || strings.ContainsAny(p, " \"`;'-") || (p[0] >= '0' && p[0] <= '9') {
				t.Fatalf("valid table %q: part %q is not a safe identifier", r.Table, p)
			}
		}
	})
}
