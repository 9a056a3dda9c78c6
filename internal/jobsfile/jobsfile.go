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

	Retries         int           // schedulerhost.Job.Retries
	RetryBackoff    time.Duration // schedulerhost.Job.RetryBackoff
	RetryBackoffMax time.Duration // schedulerhost.Job.RetryBackoffMax
	Jitter          time.Duration // schedulerhost.Job.Jitter

	// Line is the line of the job's entry in the list.
	Line int
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
