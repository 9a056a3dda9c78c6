package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/httpapi/appcheck"
	"github.com/batonhq/baton/internal/execjob"
	"github.com/batonhq/baton/internal/httpjob"
	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
)

// ShutdownConfigOf returns the settings of f that bound a graceful stop.
func ShutdownConfigOf(f *jobsfile.File) httpapi.ShutdownConfig {
	return httpapi.ShutdownConfig{ShutdownTimeout: f.Election.ShutdownTimeout, KillGrace: f.Election.KillGrace, ReleaseTimeout: f.Election.ReleaseTimeout}
}

// HostConfig is the schedulerhost configuration of f's jobs, run by
// instance in election electionName, logging to log: the jobs, the
// shutdown timeout, and the Host's kill grace (the commands' grace plus
// httpapi.KillGraceMargin). The caller adds the Ledger and the Observer. The
// error, located in f (FILE:LINE: jobs[i]: ...), is an HTTP job whose
// TLS files do not load, or a safety_margin below
// execjob.MinSafetyMargin with command jobs.
func HostConfig(f *jobsfile.File, electionName, instance string, log *slog.Logger) (schedulerhost.Config, error) {
	b := ShutdownConfigOf(f).WithDefaults()
	jobs, err := hostJobs(f, electionName, instance, b.KillGrace, log)
	if m := f.Election.SafetyMargin; m > 0 && m < execjob.MinSafetyMargin && hasCommand(f) {
		err = errors.Join(err, &jobsfile.Error{File: f.Path, Line: f.Election.Line, Field: "election.safety_margin",
			Msg: fmt.Sprintf("%v: below %v, which command jobs need: a lost term's commands must be killed within half of it, before the lease can pass", m, execjob.MinSafetyMargin)})
	}
	return schedulerhost.Config{
		Jobs:            jobs,
		ShutdownTimeout: f.Election.ShutdownTimeout,
		KillGrace:       b.KillGrace + httpapi.KillGraceMargin,
		Instance:        instance,
		Logger:          log,
	}, err
}

func hasCommand(f *jobsfile.File) bool {
	for _, j := range f.Jobs {
		if j.Command != "" {
			return true
		}
	}
	return false
}

// hostJobs turns the file's jobs into schedulerhost jobs run by this
// instance; command jobs get grace between SIGTERM and SIGKILL. The error
// is located in f.
func hostJobs(f *jobsfile.File, electionName, instance string, grace time.Duration, log *slog.Logger) ([]schedulerhost.Job, error) {
	var out []schedulerhost.Job
	var errs []error
	for _, j := range f.Jobs {
		hj := schedulerhost.Job{
			Name:         j.Name,
			Schedule:     j.Schedule,
			Timeout:      j.Timeout,
			Overlap:      j.Overlap,
			Misfire:      j.Misfire,
			MisfireGrace: j.MisfireGrace,
			MaxCatchUp:   j.MaxCatchUp,

			Retries:         j.Retries,
			RetryBackoff:    j.RetryBackoff,
			RetryBackoffMax: j.RetryBackoffMax,
			Jitter:          j.Jitter,
			Deadline:        j.Deadline,
		}
		switch {
		case j.Command != "":
			c := &execjob.Command{Job: j.Name, Script: j.Command, Election: electionName, Instance: instance,
				KillGrace: grace, Logger: log}
			hj.Run = c.Run
		case j.HTTP != nil:
			hj.Run = failJob // replaced below; a job that does not load is an error anyway
			h, err := httpjob.New(j.Name, electionName, instance, httpRequest(j.HTTP))
			if err != nil {
				errs = append(errs, fmt.Errorf("job %q: http: %w", j.Name, err))
				break
			}
			hj.Run = h.Run
			if hj.Timeout == 0 {
				hj.Timeout = httpDefaultTimeout // a job timeout: recorded as timeout, never retried
			}
		case j.Builtin == jobsfile.BuiltinSleep:
			hj.Run = sleepJob(j.Duration)
		case j.Builtin == jobsfile.BuiltinLog:
			hj.Run = logJob(log)
		case j.Builtin == jobsfile.BuiltinFail:
			hj.Run = failJob
		}
		out = append(out, hj)
	}
	return out, f.Locate(errors.Join(errs...))
}

// httpDefaultTimeout is the timeout of an HTTP job without one; tests
// shorten it.
var httpDefaultTimeout = httpjob.DefaultTimeout

// httpRequest is the httpjob request of an http job.
func httpRequest(h *jobsfile.HTTP) httpjob.Request {
	r := httpjob.Request{Method: h.Method, URL: h.URL, Body: h.Body, BearerTokenFile: h.BearerTokenFile,
		CACert: h.CACert, Cert: h.ClientCert, Key: h.Key, RetryStatuses: h.RetryStatuses}
	if len(h.Headers) > 0 {
		r.Header = http.Header{}
		for _, kv := range h.Headers {
			r.Header.Add(kv[0], kv[1])
		}
	}
	return r
}

// sleepJob sleeps for d or until its run is cancelled. A graceful stop
// does not cancel it before the shutdown timeout, so it finishes.
func sleepJob(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("sleep interrupted: %w", context.Cause(ctx))
		}
	}
}

func logJob(log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		token, _ := election.TokenFromContext(ctx)
		tick, _ := schedulerhost.TickFromContext(ctx)
		log.Info("hello from the leader", "job", tick.Job, "tick", tick.Time, "token", token)
		return nil
	}
}

var errDemoFailure = errors.New("demo: this job always fails")

func failJob(context.Context) error { return errDemoFailure }

// AppChecker returns the application check f asks for (its app section,
// else a TCP connect to its HTTP jobs' endpoints), nil for none.
func AppChecker(f *jobsfile.File) (*appcheck.Checker, error) {
	check, url, addrs := f.AppCheck()
	if check == jobsfile.CheckNone {
		return nil, nil
	}
	c, err := appcheck.New(appcheck.Config{URL: url, Addrs: addrs, Interval: f.App.Interval, Timeout: f.App.Timeout,
		UnhealthyAfter: f.App.UnhealthyAfter, HealthyAfter: f.App.HealthyAfter})
	if err != nil {
		return nil, fmt.Errorf("%s:%d: app: %w", f.Path, f.App.Line, err)
	}
	return c, nil
}
