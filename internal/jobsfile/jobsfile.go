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
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/batonhq/baton/schedulerhost"
)

// File is a decoded jobs file.
type File struct {
	// Path is the file name as given to Load, used in error messages.
	Path     string
	Election Election
	Jobs     []Job
	// App is the app section: the health check of the application
	// beside the sidecar (AppCheck gives it after its defaults).
	App App
	// Settings are the backend and node sections, and election.name, in
	// file order: what the command's flags would otherwise say. The
	// command checks the names (jobsfile does not know its flags).
	Settings []Setting
	// ElectionLines are the lines of the election section's fields
	// present, by key ("ttl"), for errors about their values.
	ElectionLines map[string]int
}

// Setting is one entry of the backend or node section, or election.name.
type Setting struct {
	Section string // "backend", "node" or "election"
	Key     string // as written, e.g. "endpoints"
	Value   string // a list is joined with commas
	Line    int
}

// Field is the setting's path for errors, e.g. backend.endpoints.
func (s Setting) Field() string { return s.Section + "." + s.Key }

// Errorf is an error at the setting's line, naming its field.
func (f *File) Errorf(s Setting, format string, args ...any) error {
	return &Error{File: f.Path, Line: s.Line, Field: s.Field(), Msg: fmt.Sprintf(format, args...)}
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

// Job is one entry of jobs. Exactly one of Builtin, Command and HTTP is
// set.
type Job struct {
	Name     string
	Schedule string
	Builtin  Builtin
	Duration time.Duration // sleep only
	Command  string        // run with /bin/sh -c
	HTTP     *HTTP         // one request to a service

	Timeout      time.Duration
	Overlap      schedulerhost.Overlap
	Misfire      schedulerhost.Misfire
	MisfireGrace time.Duration
	MaxCatchUp   int

	Retries         int           // schedulerhost.Job.Retries
	RetryBackoff    time.Duration // schedulerhost.Job.RetryBackoff
	RetryBackoffMax time.Duration // schedulerhost.Job.RetryBackoffMax
	Jitter          time.Duration // schedulerhost.Job.Jitter
	// Deadline is schedulerhost.Job.Deadline. Left out of the JSON (and
	// so of JobsHash) when zero: a file without it hashes as before.
	Deadline time.Duration `json:",omitempty"`

	// Line is the line of the job's entry in the list.
	Line int
}

// HTTP is an HTTP job: one request per run (internal/httpjob). A 2xx
// answer is success.
type HTTP struct {
	Method  string      // default POST
	URL     string      // http:// or https://
	Headers [][2]string // name, value; in file order
	Body    string

	BearerTokenFile string // read at every run, sent as Authorization: Bearer
	CACert          string // PEM; default the system roots
	ClientCert, Key string // PEM, for servers that ask for a client certificate

	// RetryStatuses are the statuses that retries apply to
	// (httpjob.Request.RetryStatuses): nil if not set, empty if [].
	RetryStatuses []string
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
