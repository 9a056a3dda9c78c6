package jobsfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
)

// render writes f back as a jobs file: what Parse accepted, in the
// canonical form (every duration as Go prints it, every string
// double-quoted). It builds the YAML nodes itself: yaml.v3 writes a
// string that starts with a newline, or holds a tab before a line break,
// as a block scalar it cannot read back.
func render(t *testing.T, f *jobsfile.File) []byte {
	t.Helper()
	str := func(m *yaml.Node, k, v string) {
		if v != "" {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k},
				&yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: v})
		}
	}
	dur := func(m *yaml.Node, k string, d time.Duration) {
		if d != 0 {
			str(m, k, d.String())
		}
	}
	num := func(m *yaml.Node, k string, n int) {
		if n != 0 {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k},
				&yaml.Node{Kind: yaml.ScalarNode, Value: strconv.Itoa(n)})
		}
	}
	doc := &yaml.Node{Kind: yaml.MappingNode}
	e := f.Election
	election := &yaml.Node{Kind: yaml.MappingNode}
	for _, kv := range []struct {
		key string
		d   time.Duration
	}{ // every setting of the section is a duration
		{"ttl", e.TTL}, {"renew_interval", e.RenewInterval}, {"safety_margin", e.SafetyMargin},
		{"retry_period", e.RetryPeriod}, {"release_timeout", e.ReleaseTimeout},
		{"shutdown_timeout", e.ShutdownTimeout}, {"kill_grace", e.KillGrace}, {"poll_interval", e.PollInterval},
	} {
		dur(election, kv.key, kv.d)
	}
	if len(election.Content) > 0 {
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "election"}, election)
	}
	jobs := &yaml.Node{Kind: yaml.SequenceNode}
	for _, j := range f.Jobs {
		m := &yaml.Node{Kind: yaml.MappingNode}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "name"},
			&yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: j.Name},
			&yaml.Node{Kind: yaml.ScalarNode, Value: "schedule"},
			&yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: j.Schedule})
		str(m, "builtin", string(j.Builtin))
		if j.Builtin == jobsfile.BuiltinSleep {
			str(m, "duration", j.Duration.String()) // required with sleep, even if zero
		}
		str(m, "command", j.Command)
		dur(m, "timeout", j.Timeout)
		str(m, "overlap", string(j.Overlap))
		str(m, "misfire", string(j.Misfire))
		dur(m, "misfire_grace", j.MisfireGrace)
		num(m, "max_catch_up", j.MaxCatchUp)
		num(m, "retries", j.Retries)
		dur(m, "retry_backoff", j.RetryBackoff)
		dur(m, "retry_backoff_max", j.RetryBackoffMax)
		dur(m, "jitter", j.Jitter)
		jobs.Content = append(jobs.Content, m)
	}
	doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "jobs"}, jobs)
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
	// Commands that yaml.v3 writes as block scalars it cannot read back.
	f.Add([]byte("jobs:\n  - {name: a, schedule: '0 0 1 1 0', command: \"\\n0\"}\n"))
	f.Add([]byte("jobs:\n  - {name: a, schedule: '0 0 1 1 0', command: \"\\t\\n0\"}\n"))
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
