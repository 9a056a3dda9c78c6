package jobsfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
)

// render writes f back as a jobs file: what Parse accepted, in the
// canonical form (every duration as Go prints it, every string quoted by
// the YAML encoder).
func render(t *testing.T, f *jobsfile.File) []byte {
	t.Helper()
	type job struct {
		Name         string `yaml:"name"`
		Schedule     string `yaml:"schedule"`
		Builtin      string `yaml:"builtin,omitempty"`
		Duration     string `yaml:"duration,omitempty"`
		Command      string `yaml:"command,omitempty"`
		Timeout      string `yaml:"timeout,omitempty"`
		Overlap      string `yaml:"overlap,omitempty"`
		Misfire      string `yaml:"misfire,omitempty"`
		MisfireGrace string `yaml:"misfire_grace,omitempty"`
		MaxCatchUp   int    `yaml:"max_catch_up,omitempty"`

		Retries         int    `yaml:"retries,omitempty"`
		RetryBackoff    string `yaml:"retry_backoff,omitempty"`
		RetryBackoffMax string `yaml:"retry_backoff_max,omitempty"`
		Jitter          string `yaml:"jitter,omitempty"`
	}
	dur := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	e := f.Election
	doc := struct {
		Election map[string]string `yaml:"election,omitempty"`
		Jobs     []job             `yaml:"jobs"`
	}{Election: map[string]string{}}
	for k, d := range map[string]time.Duration{"ttl": e.TTL, "renew_interval": e.RenewInterval, "safety_margin": e.SafetyMargin,
		"retry_period": e.RetryPeriod, "release_timeout": e.ReleaseTimeout, "shutdown_timeout": e.ShutdownTimeout,
		"kill_grace": e.KillGrace, "poll_interval": e.PollInterval} {
		if d != 0 {
			doc.Election[k] = d.String()
		}
	}
	for _, j := range f.Jobs {
		r := job{Name: j.Name, Schedule: j.Schedule, Builtin: string(j.Builtin), Command: j.Command,
			Timeout: dur(j.Timeout), Overlap: string(j.Overlap), Misfire: string(j.Misfire),
			MisfireGrace: dur(j.MisfireGrace), MaxCatchUp: j.MaxCatchUp,
			Retries: j.Retries, RetryBackoff: dur(j.RetryBackoff), RetryBackoffMax: dur(j.RetryBackoffMax), Jitter: dur(j.Jitter)}
		if j.Builtin == jobsfile.BuiltinSleep {
			r.Duration = j.Duration.String() // required with sleep, even if zero
		}
		doc.Jobs = append(doc.Jobs, r)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return out
}

// withoutLines is f with its line numbers zeroed, to compare two parses of
// the same jobs laid out differently.
func withoutLines(f *jobsfile.File) *jobsfile.File {
	g := *f
	g.Election.Line = 0
	g.Jobs = append([]jobsfile.Job(nil), f.Jobs...)
	for i := range g.Jobs {
		g.Jobs[i].Line = 0
	}
	return &g
}

// FuzzParse: Parse never panics; every problem it reports is an *Error
// naming the file and a line within it (the empty file aside, which has
// none); what it accepts holds the Job invariants (a name, a schedule
// ParseSchedule takes, exactly one of builtin and command, a duration
// only for sleep), and rendered back and parsed again gives the same file.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("jobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n"))
	f.Add([]byte("jobs:\n  - name: a\n    schedule: 'CRON_TZ=Europe/Berlin 30 2 * * *'\n    command: date\n    misfire: skip\n"))
	f.Add([]byte("jobs:\n\t- name: a\n"))
	f.Add([]byte("election:\n  ttl: 5\njobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("---\njobs: []\n---\njobs: []\n"))
	f.Add([]byte(""))
	if _, file, _, ok := runtime.Caller(0); ok {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "cmd", "demo", "jobs.example.yaml")); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const name = "j.yaml"
		file, err := jobsfile.Parse(name, data)
		if err != nil {
			if file != nil {
				t.Fatalf("both a file and an error: %v", err)
			}
			lines := strings.Count(string(data), "\n") + 1
			var errs []error
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			} else {
				errs = []error{err}
			}
			for _, e := range errs {
				var fe *jobsfile.Error
				if !errors.As(e, &fe) {
					t.Fatalf("%T %v: not a *jobsfile.Error", e, e)
				}
				if fe.File != name || !strings.HasPrefix(fe.Error(), name) {
					t.Fatalf("%v: does not name the file", fe)
				}
				empty := len(strings.TrimSpace(string(data))) == 0 || strings.Contains(fe.Msg, "empty file")
				if (fe.Line < 1 && !empty) || fe.Line > lines {
					t.Fatalf("%q: line %d, want 1..%d", fe.Error(), fe.Line, lines)
				}
			}
			return
		}
		for i, j := range file.Jobs {
			if j.Name == "" {
				t.Fatalf("jobs[%d]: empty name accepted", i)
			}
			if _, err := schedulerhost.ParseSchedule(j.Schedule); err != nil {
				t.Fatalf("jobs[%d]: schedule %q accepted, but ParseSchedule: %v", i, j.Schedule, err)
			}
			if (j.Builtin == "") == (j.Command == "") {
				t.Fatalf("jobs[%d]: builtin %q and command %q: want exactly one", i, j.Builtin, j.Command)
			}
			if j.Duration != 0 && j.Builtin != jobsfile.BuiltinSleep {
				t.Fatalf("jobs[%d]: duration %v with builtin %q", i, j.Duration, j.Builtin)
			}
		}
		again := render(t, file)
		file2, err := jobsfile.Parse(name, again)
		if err != nil {
			t.Fatalf("rendered file does not parse: %v\n%s", err, again)
		}
		a, b := withoutLines(file), withoutLines(file2)
		if a.Election != b.Election || len(a.Jobs) != len(b.Jobs) {
			t.Fatalf("round trip:\n%+v\n%+v\n%s", a, b, again)
		}
		for i := range a.Jobs {
			if a.Jobs[i] != b.Jobs[i] {
				t.Fatalf("round trip jobs[%d]:\n%+v\n%+v\n%s", i, a.Jobs[i], b.Jobs[i], again)
			}
		}
	})
}
