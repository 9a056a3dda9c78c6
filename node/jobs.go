package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/execjob"
	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
)

// ShutdownConfigOf returns the settings of f that bound a graceful stop.
func ShutdownConfigOf(f *jobsfile.File) ShutdownConfig {
	return ShutdownConfig{ShutdownTimeout: f.Election.ShutdownTimeout, KillGrace: f.Election.KillGrace, ReleaseTimeout: f.Election.ReleaseTimeout}
}

// HostConfig is the schedulerhost configuration of f's jobs, run by
// instance in election electionName, logging to log: the jobs, the
// shutdown timeout, and the Host's kill grace (the commands' grace plus
// KillGraceMargin). The caller adds the Ledger and the Observer.
func HostConfig(f *jobsfile.File, electionName, instance string, log *slog.Logger) schedulerhost.Config {
	b := ShutdownConfigOf(f).withDefaults()
	return schedulerhost.Config{
		Jobs:            hostJobs(f, electionName, instance, b.KillGrace, log),
		ShutdownTimeout: f.Election.ShutdownTimeout,
		KillGrace:       b.KillGrace + KillGraceMargin,
		Instance:        instance,
		Logger:          log,
	}
}

// hostJobs turns the file's jobs into schedulerhost jobs run by this
// instance; command jobs get grace between SIGTERM and SIGKILL.
func hostJobs(f *jobsfile.File, electionName, instance string, grace time.Duration, log *slog.Logger) []schedulerhost.Job {
	var out []schedulerhost.Job
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
		}
		switch {
		case j.Command != "":
			c := &execjob.Command{Job: j.Name, Script: j.Command, Election: electionName, Instance: instance,
				KillGrace: grace, Logger: log}
			hj.Run = c.Run
		case j.Builtin == jobsfile.BuiltinSleep:
			hj.Run = sleepJob(j.Duration)
		case j.Builtin == jobsfile.BuiltinLog:
			hj.Run = logJob(log)
		case j.Builtin == jobsfile.BuiltinFail:
			hj.Run = failJob
		}
		out = append(out, hj)
	}
	return out
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
