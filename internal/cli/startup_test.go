package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/batonhq/baton/internal/testdb"
)

// A SQL backend that refuses the connection fails `baton run` with one
// error that names the command, the file, line and field, and the
// backend, without the schema's statements: a wrong MySQL password, and a
// PostgreSQL server not listening.
func TestNode_SQLStartupErrors(t *testing.T) {
	my := testdb.OpenT(t, testdb.MySQL)
	my.Close()
	mc, err := mysql.ParseDSN(testdb.DSN(testdb.MySQL))
	if err != nil {
		t.Fatal(err)
	}
	mc.Passwd = "not-the-password"
	for _, c := range []struct{ kind, dsn string }{
		{"mysql", mc.FormatDSN()},
		{"postgres", "postgres://postgres@127.0.0.1:1/test?sslmode=disable"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			path := writeConfig(t, fmt.Sprintf(`election:
  name: startup-test
backend:
  kind: %s
  dsn: '%s'
jobs:
  - {name: a, schedule: "@every 1m", http: {url: "http://127.0.0.1:1/"}}
`, c.kind, c.dsn))
			p := &Program{Name: "baton", Getenv: env(nil)}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := p.Node(ctx, "run", []string{"--config", path, "--http", ""}, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("no error")
			}
			got := err.Error()
			want := "baton run: " + path + ":5: backend.dsn: --dsn: " + c.kind + " table baton_lease: connect: "
			if !strings.HasPrefix(got, want) || strings.Contains(got, "CREATE") || strings.Contains(got, "\n") {
				t.Errorf("error:\n%s\nwant one line starting %q, no statement", got, want)
			}
		})
	}
}
