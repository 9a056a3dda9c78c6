// Package jobsfile reads the YAML jobs file of the demo binary: election
// timing and a list of jobs, each a built-in demo job or a shell command.
//
// Decoding is strict. Every problem (an unknown or repeated field, a value
// of the wrong kind, a bad duration or cron spec, a job with neither or
// both of builtin and command) is reported as
//
//	FILE:LINE: FIELD: VALUE: what is wrong
//
// with FIELD a path such as jobs[1].timeout (jobs counted from 0), and
// Load returns all of them at once.
package jobsfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/schedulerhost"
)

// File is a decoded jobs file.
type File struct {
	// Path is the file name as given to Load, used in error messages.
	Path     string
	Election Election
	Jobs     []Job
}

// Election holds the election and drain timing. Zero means the library's
// default (see election.Timing, election.Config and schedulerhost.Config).
type Election struct {
	TTL             time.Duration // election.Timing.TTL; etcd: whole seconds, >= 2s; SQL >= 1s; Consul >= 10s
	RenewInterval   time.Duration // election.Timing.RenewInterval
	SafetyMargin    time.Duration // election.Timing.SafetyMargin
	RetryPeriod     time.Duration // election.Config.RetryPeriod
	ReleaseTimeout  time.Duration // election.Config.ReleaseTimeout
	ShutdownTimeout time.Duration // schedulerhost.Config.ShutdownTimeout
	KillGrace       time.Duration // grace between SIGTERM and SIGKILL of a cancelled command job
	PollInterval    time.Duration // SQL followers: sql.Config.PollInterval

	// Line is the line of the election key, 0 if absent.
	Line int
}

// Builtin names a built-in demo job.
type Builtin string

// Built-in jobs.
const (
	BuiltinSleep Builtin = "sleep" // sleeps for Duration, or until cancelled
	BuiltinLog   Builtin = "log"   // logs one line with its token and tick
	BuiltinFail  Builtin = "fail"  // returns an error
)

// Job is one entry of jobs. Exactly one of Builtin and Command is set.
type Job struct {
	Name     string
	Schedule string
	Builtin  Builtin
	Duration time.Duration // sleep only
	Command  string        // run with /bin/sh -c

	Timeout      time.Duration
	Overlap      schedulerhost.Overlap
	Misfire      schedulerhost.Misfire
	MisfireGrace time.Duration
	MaxCatchUp   int

	// Line is the line of the job's entry in the list.
	Line int
}

// Error is one problem in a file.
type Error struct {
	File  string
	Line  int
	Field string // e.g. "jobs[1].timeout"; empty for the whole file
	Msg   string // what is wrong, starting with the offending value if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads and decodes path. The error, if any, joins one *Error per
// problem (errors.Join), one per line when printed.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("jobsfile: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes data, naming it path in errors.
func Parse(path string, data []byte) (*File, error) {
	d := &decoder{file: path}
	f := &File{Path: path}
	d.decodeFile(f, data)
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	return f, nil
}

type decoder struct {
	file string
	errs []error
}

func (d *decoder) fail(line int, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (d *decoder) decodeFile(f *File, data []byte) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		msg := err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			d.fail(n, "", "%s", m[2])
		} else if strings.Contains(msg, "EOF") {
			d.fail(0, "", "empty file: want election: and jobs:")
		} else {
			d.fail(0, "", "%s", strings.TrimPrefix(msg, "yaml: "))
		}
		return
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		d.fail(more.Line, "", "a second YAML document: want one")
		return
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	fields, ok := d.mapping(root, "", []string{"election", "jobs"})
	if !ok {
		return
	}
	if n, ok := fields["election"]; ok {
		f.Election = d.election(n.key, n.val)
	}
	n, ok := fields["jobs"]
	if !ok {
		d.fail(root.Line, "jobs", "required: a list of jobs")
		return
	}
	f.Jobs = d.jobs(n.val)
}

type field struct{ key, val *yaml.Node }

// mapping checks that n is a mapping whose keys are all in known, without
// repeats, and returns its fields by key.
func (d *decoder) mapping(n *yaml.Node, path string, known []string) (map[string]field, bool) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "%s: want a mapping of %s", describe(n), strings.Join(known, ", "))
		return nil, false
	}
	out := map[string]field{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		full := join(path, name)
		if k.Kind != yaml.ScalarNode {
			d.fail(k.Line, path, "%s as a key: want a field name", describe(k))
			continue
		}
		if !contains(known, name) {
			d.fail(k.Line, full, "unknown field (want one of %s)", strings.Join(known, ", "))
			continue
		}
		if prev, dup := out[name]; dup {
			d.fail(k.Line, full, "repeated (first on line %d)", prev.key.Line)
			continue
		}
		out[name] = field{k, v}
	}
	return out, true
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

var electionFields = []string{"ttl", "renew_interval", "safety_margin", "retry_period", "release_timeout", "shutdown_timeout", "kill_grace", "poll_interval"}

func (d *decoder) election(key, n *yaml.Node) Election {
	e := Election{Line: key.Line}
	fields, ok := d.mapping(n, "election", electionFields)
	if !ok {
		return e
	}
	for name, dst := range map[string]*time.Duration{
		"ttl": &e.TTL, "renew_interval": &e.RenewInterval, "safety_margin": &e.SafetyMargin,
		"retry_period": &e.RetryPeriod, "release_timeout": &e.ReleaseTimeout,
		"shutdown_timeout": &e.ShutdownTimeout, "kill_grace": &e.KillGrace, "poll_interval": &e.PollInterval,
	} {
		if f, ok := fields[name]; ok {
			*dst = d.duration(f.val, "election."+name)
		}
	}
	return e
}

func (d *decoder) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n.Line, path, "%s: want a single value", describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node, path string) string {
	s, ok := d.scalar(n, path)
	if !ok {
		return ""
	}
	if n.Tag == "!!null" {
		d.fail(n.Line, path, "empty: want a value")
		return ""
	}
	return s
}

// duration parses a Go duration string ("5s", "1m30s"); negative values
// are errors.
func (d *decoder) duration(n *yaml.Node, path string) time.Duration {
	s, ok := d.scalar(n, path)
	if !ok {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		if s == "0" {
			return 0
		}
		d.fail(n.Line, path, "%q: not a duration (want e.g. \"5s\", \"1m30s\")", s)
		return 0
	}
	if v < 0 {
		d.fail(n.Line, path, "%q: must not be negative", s)
		return 0
	}
	return v
}

var jobFields = []string{"name", "schedule", "builtin", "duration", "command", "timeout", "overlap", "misfire", "misfire_grace", "max_catch_up"}

// oneOf reads the string at n (path names it in errors) as one of
// allowed, which want lists for the error. An empty string is no error
// and gives the zero value; any other value not allowed is reported and
// gives the zero value too.
func oneOf[T ~string](d *decoder, n *yaml.Node, path string, allowed []T, want string) T {
	s := d.str(n, path)
	if s == "" || slices.Contains(allowed, T(s)) {
		return T(s)
	}
	d.fail(n.Line, path, "%q: unknown (want %s)", s, want)
	return ""
}

func (d *decoder) jobs(n *yaml.Node) []Job {
	if n.Kind != yaml.SequenceNode {
		d.fail(n.Line, "jobs", "%s: want a list of jobs", describe(n))
		return nil
	}
	if len(n.Content) == 0 {
		d.fail(n.Line, "jobs", "empty: want at least one job")
		return nil
	}
	var out []Job
	seen := map[string]int{}
	for i, jn := range n.Content {
		path := fmt.Sprintf("jobs[%d]", i)
		j, ok := d.job(jn, path)
		if !ok {
			continue
		}
		if j.Name != "" {
			if line, dup := seen[j.Name]; dup {
				d.fail(jn.Line, path+".name", "%q: repeated (first on line %d)", j.Name, line)
			}
			seen[j.Name] = jn.Line
		}
		out = append(out, j)
	}
	return out
}

func (d *decoder) job(n *yaml.Node, path string) (Job, bool) {
	j := Job{Line: n.Line}
	fields, ok := d.mapping(n, path, jobFields)
	if !ok {
		return j, false
	}
	if f, ok := fields["name"]; ok {
		j.Name = d.str(f.val, path+".name")
	} else {
		d.fail(n.Line, path+".name", "required")
	}
	if f, ok := fields["schedule"]; ok {
		p := path + ".schedule"
		j.Schedule = d.str(f.val, p)
		if j.Schedule != "" {
			if _, err := schedulerhost.ParseSchedule(j.Schedule); err != nil {
				d.fail(f.val.Line, p, "%q: %v", j.Schedule, err)
			}
		}
	} else {
		d.fail(n.Line, path+".schedule", "required (a cron spec such as \"*/5 * * * * *\" or \"@every 10s\")")
	}
	bf, hasBuiltin := fields["builtin"]
	cf, hasCommand := fields["command"]
	switch {
	case hasBuiltin && hasCommand:
		d.fail(cf.key.Line, path+".command", "set together with builtin (line %d): want exactly one", bf.key.Line)
	case !hasBuiltin && !hasCommand:
		d.fail(n.Line, path+".command", "required: set command (run with /bin/sh -c) or builtin (sleep, log, fail)")
	case hasCommand:
		p := path + ".command"
		j.Command = d.str(cf.val, p)
		if j.Command == "" && cf.val.Tag != "!!null" && cf.val.Kind == yaml.ScalarNode {
			d.fail(cf.val.Line, p, "\"\": must not be empty")
		}
	case hasBuiltin:
		j.Builtin = oneOf(d, bf.val, path+".builtin", []Builtin{BuiltinSleep, BuiltinLog, BuiltinFail}, "sleep, log or fail")
	}
	if f, ok := fields["duration"]; ok {
		p := path + ".duration"
		j.Duration = d.duration(f.val, p)
		if hasBuiltin && j.Builtin != "" && j.Builtin != BuiltinSleep {
			d.fail(f.key.Line, p, "only for builtin sleep, not %s", j.Builtin)
		} else if hasCommand {
			d.fail(f.key.Line, p, "only for builtin sleep, not for a command")
		}
	} else if j.Builtin == BuiltinSleep {
		d.fail(bf.key.Line, path+".duration", "required with builtin sleep (e.g. duration: 4s)")
	}
	if f, ok := fields["timeout"]; ok {
		j.Timeout = d.duration(f.val, path+".timeout")
	}
	if f, ok := fields["misfire_grace"]; ok {
		j.MisfireGrace = d.duration(f.val, path+".misfire_grace")
	}
	if f, ok := fields["overlap"]; ok {
		j.Overlap = oneOf(d, f.val, path+".overlap",
			[]schedulerhost.Overlap{schedulerhost.OverlapSkip, schedulerhost.OverlapAllow, schedulerhost.OverlapQueue}, "skip, allow or queue")
	}
	if f, ok := fields["misfire"]; ok {
		j.Misfire = oneOf(d, f.val, path+".misfire",
			[]schedulerhost.Misfire{schedulerhost.MisfireSkip, schedulerhost.MisfireRunOnce, schedulerhost.MisfireRunAll}, "skip, run-once or run-all")
	}
	if f, ok := fields["max_catch_up"]; ok {
		p := path + ".max_catch_up"
		if s, ok := d.scalar(f.val, p); ok {
			v, err := strconv.Atoi(s)
			switch {
			case err != nil:
				d.fail(f.val.Line, p, "%q: want a whole number", s)
			case v < 0:
				d.fail(f.val.Line, p, "%q: must not be negative", s)
			default:
				j.MaxCatchUp = v
			}
		}
	}
	return j, true
}

// JobLine returns the line of the job named name, or 0.
func (f *File) JobLine(name string) int {
	for _, j := range f.Jobs {
		if j.Name == name {
			return j.Line
		}
	}
	return 0
}

var hostJob = regexp.MustCompile(`job "((?:[^"\\]|\\.)*)"`)

// Locate rewrites an error from schedulerhost.New (or anything else that
// names jobs as job "NAME") so that each of its lines starts with
// FILE:LINE of the job it names, or FILE when it names none.
func (f *File) Locate(err error) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimPrefix(line, "schedulerhost: invalid config: ")
		e := &Error{File: f.Path, Msg: line}
		if m := hostJob.FindStringSubmatch(line); m != nil {
			name, uerr := strconv.Unquote(`"` + m[1] + `"`)
			if uerr == nil {
				for i, j := range f.Jobs {
					if j.Name == name {
						e.Line = j.Line
						e.Field = fmt.Sprintf("jobs[%d]", i)
						e.Msg = strings.TrimPrefix(strings.TrimPrefix(line, m[0]), ": ")
					}
				}
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}
