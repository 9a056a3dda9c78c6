package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
)

const config = `election:
  name: orders
  ttl: 5s
backend:
  kind: postgres
  dsn: postgres://baton@db:5432/prod
  table: jobs_lease
node:
  http: 127.0.0.1:9001
  step_down_cooldown: 1m
  standby: true
jobs:
  - name: report
    schedule: "@every 1m"
    http: {url: "http://127.0.0.1:8080/jobs/report"}
`

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// The config file sets the flags; BATON_* variables override it; flags on
// the command line override both.
func TestSettings_Precedence(t *testing.T) {
	path := writeConfig(t, config)
	p := &Program{Name: "baton", Getenv: env(nil)}
	o, _, _, err := p.nodeSettings("run", []string{"--config", path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.bf.Kind != "postgres" || o.bf.Election != "orders" || o.httpAddr != "127.0.0.1:9001" || o.cooldown != time.Minute || !o.standby {
		t.Errorf("from the file: kind %q election %q http %q cooldown %v standby %v", o.bf.Kind, o.bf.Election, o.httpAddr, o.cooldown, o.standby)
	}

	p.Getenv = env(map[string]string{"BATON_HTTP": "127.0.0.1:9002", "BATON_ELECTION": "billing", "BATON_CONFIG": path})
	o, _, _, err = p.nodeSettings("run", nil, io.Discard) // the file from $BATON_CONFIG
	if err != nil {
		t.Fatal(err)
	}
	if o.httpAddr != "127.0.0.1:9002" || o.bf.Election != "billing" || o.bf.Kind != "postgres" {
		t.Errorf("env over the file: http %q election %q kind %q", o.httpAddr, o.bf.Election, o.bf.Kind)
	}

	o, _, _, err = p.nodeSettings("run", []string{"--http", "127.0.0.1:9003", "--standby=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.httpAddr != "127.0.0.1:9003" || o.standby || o.bf.Election != "billing" {
		t.Errorf("flags over env and file: http %q standby %v election %q", o.httpAddr, o.standby, o.bf.Election)
	}
}

// Every error names where the bad value came from: FILE:LINE and the
// field, or the variable.
func TestSettings_Errors(t *testing.T) {
	p := &Program{Name: "baton", Getenv: env(nil)}
	for _, c := range []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"unknown backend setting", strings.Replace(config, "  table:", "  tabel:", 1), nil,
			"baton.yaml:7: backend.tabel: unknown setting (want one of kind, consul_addr, consul_cacert,"},
		{"election in backend", strings.Replace(config, "  table: jobs_lease", "  election: x", 1), nil,
			"baton.yaml:7: backend.election: unknown setting"},
		{"unknown node setting", strings.Replace(config, "  standby: true", "  standbye: true", 1), nil,
			"baton.yaml:11: node.standbye: unknown setting (want one of id, http, standby, step_down_cooldown, admin_token_file, log_format, log_level)"},
		{"bad duration in the file", strings.Replace(config, "1m", "soon", 1), nil,
			`baton.yaml:10: node.step_down_cooldown: "soon": parse error`},
		{"bad bool in the file", strings.Replace(config, "standby: true", "standby: perhaps", 1), nil,
			`baton.yaml:11: node.standby: "perhaps": parse error`},
		{"bad env", config, map[string]string{"BATON_STANDBY": "perhaps"},
			`$BATON_STANDBY="perhaps": parse error`},
		{"no config", "", nil, "baton: --config is required (or $BATON_CONFIG)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p.Getenv = env(c.env)
			var args []string
			if c.yaml != "" {
				args = []string{"--config", writeConfig(t, c.yaml)}
			}
			_, _, _, err := p.nodeSettings("run", args, io.Discard)
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			got := err.Error()
			if i := strings.Index(got, "baton.yaml"); i > 0 {
				got = got[i:] // drop the temporary directory
			}
			if !strings.HasPrefix(got, c.want) {
				t.Errorf("error:\n got %s\nwant %s...", got, c.want)
			}
		})
	}
}

// An error about a value names the file line it came from, or its
// variable; a value from the command line stays as the flag.
func TestSettings_Locate(t *testing.T) {
	path := writeConfig(t, config)
	p := &Program{Name: "baton", Getenv: env(map[string]string{"BATON_TABLE": "t"})}
	_, _, src, err := p.nodeSettings("run", []string{"--config", path, "--admin-token-file", "/none"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want string }{
		{"--dsn postgres://baton@db:5432/prod: connection refused", path + ":6: backend.dsn: --dsn postgres://"},
		{"--table t: bad name", "$BATON_TABLE: --table t"},
		{"--admin-token-file: open /none: no such file", "--admin-token-file: open"},
		{"no flag here", "no flag here"},
	} {
		if got := src.locate(errors.New(c.in)).Error(); !strings.HasPrefix(got, c.want) {
			t.Errorf("locate(%q) = %q, want prefix %q", c.in, got, c.want)
		}
	}
}

// `baton run` without election.name is refused, naming the field: two
// services that both leave it out would share one leader. --election and
// $BATON_ELECTION give it too. The demo keeps its default election.
func TestSettings_ElectionNameRequired(t *testing.T) {
	path := writeConfig(t, strings.Replace(config, "  name: orders\n", "", 1))
	p := &Program{Name: "baton", Getenv: env(nil)}
	_, _, _, err := p.nodeSettings("run", []string{"--config", path}, io.Discard)
	want := path + ":1: election.name: required" // at the election section
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("no election.name: err %v, want prefix %q", err, want)
	}
	o, _, _, err := p.nodeSettings("run", []string{"--config", path, "--election", "orders"}, io.Discard)
	if err != nil || o.bf.Election != "orders" {
		t.Errorf("--election orders: %v, election %q", err, o.bf.Election)
	}
	p.Getenv = env(map[string]string{"BATON_ELECTION": "billing"})
	o, _, _, err = p.nodeSettings("run", []string{"--config", path}, io.Discard)
	if err != nil || o.bf.Election != "billing" {
		t.Errorf("$BATON_ELECTION=billing: %v, election %q", err, o.bf.Election)
	}
	demo := &Program{Name: "demo", Getenv: env(nil), DefaultJobs: []byte("jobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n"), DefaultJobsName: "built-in"}
	o, _, _, err = demo.nodeSettings("node", nil, io.Discard)
	if err != nil || o.bf.Election != "demo" {
		t.Errorf("demo node: %v, election %q, want demo", err, o.bf.Election)
	}
}

// A relative path in the config file is relative to the file's
// directory, whatever the working directory: node.admin_token_file and
// the backend's certificate and password files.
func TestSettings_RelativePathsFromTheFile(t *testing.T) {
	path := writeConfig(t, strings.Replace(config, "  standby: true\n",
		"  standby: true\n  admin_token_file: admin-token\n", 1))
	dir := filepath.Dir(path)
	p := &Program{Name: "baton", Getenv: env(nil)}
	o, _, _, err := p.nodeSettings("run", []string{"--config", path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "admin-token"); o.tokenFile != want {
		t.Errorf("node.admin_token_file: %q, want %q", o.tokenFile, want)
	}
	// On the command line, a path stays relative to the working directory.
	o, _, _, err = p.nodeSettings("run", []string{"--config", path, "--admin-token-file", "tok"}, io.Discard)
	if err != nil || o.tokenFile != "tok" {
		t.Errorf("--admin-token-file tok: %v, %q", err, o.tokenFile)
	}

	etcd := strings.Replace(strings.Replace(config, "  kind: postgres\n", "  kind: etcd\n  etcd_user: u\n  etcd_password_file: secrets/pw\n", 1),
		"  dsn: postgres://baton@db:5432/prod\n  table: jobs_lease\n", "", 1)
	path = writeConfig(t, etcd)
	o, _, _, err = p.nodeSettings("run", []string{"--config", path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	opened, err := o.bf.Open(ctx, election.Timing{}, 0, slog.New(slog.DiscardHandler))
	if err == nil {
		opened.Close()
	}
	if want := "open " + filepath.Join(filepath.Dir(path), "secrets", "pw") + ":"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("backend.etcd_password_file: %v, want %q", err, want)
	}
}
