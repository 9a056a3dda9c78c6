package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/batonhq/baton/internal/dbtest"
)

// A SQL backend that refuses the connection fails `baton run` with one
// error that names the command, the file, line and field, and the
// backend, without the schema's statements: a wrong MySQL password, and a
// PostgreSQL server not listening.
func TestNode_SQLStartupErrors(t *testing.T) {
	my := dbtest.OpenT(t, dbtest.MySQL)
	my.Close()
	mc, err := mysql.ParseDSN(dbtest.DSN(dbtest.MySQL))
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

// A job setting that only the Host refuses (a jitter as long as the
// period) fails `baton run` at that job's line of the file, as the jobs
// file's own checks do.
func TestNode_HostErrorAtTheJobsLine(t *testing.T) {
	path := writeConfig(t, fmt.Sprintf(`election:
  name: startup-test
backend:
  kind: postgres
  dsn: '%s'
jobs:
  - {name: a, schedule: "@every 1m", http: {url: "http://127.0.0.1:1/"}}
  - {name: b, schedule: "0 * * * * *", jitter: 60s, http: {url: "http://127.0.0.1:1/"}}
`, dbtest.DSN(dbtest.Postgres)))
	dbtest.OpenT(t, dbtest.Postgres).Close()
	p := &Program{Name: "baton", Getenv: env(nil)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.Node(ctx, "run", []string{"--config", path, "--http", ""}, io.Discard, io.Discard)
	want := path + ":8: jobs[1]: Jitter 1m0s: must be shorter than"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error: %v\nwant it to contain %q", err, want)
	}
}
