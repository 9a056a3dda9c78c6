package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/execjob"
	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
)

// exampleJobs is jobs.example.yaml, used when no --config is given.
//
//go:embed jobs.example.yaml
var exampleJobs []byte

const exampleName = "jobs.example.yaml (built in)"

// loadJobs reads path, or the built-in example when path is empty.
func loadJobs(path string) (*jobsfile.File, error) {
	if path == "" {
		return jobsfile.Parse(exampleName, exampleJobs)
	}
	return jobsfile.Load(path)
}

// killGrace returns the grace between SIGTERM and SIGKILL of command jobs.
func killGrace(f *jobsfile.File) time.Duration {
	if f.Election.KillGrace > 0 {
		return f.Election.KillGrace
	}
	return execjob.DefaultKillGrace
}

// hostJobs turns the file's jobs into schedulerhost jobs run by this
// instance.
func hostJobs(f *jobsfile.File, electionName, instance string, log *slog.Logger) []schedulerhost.Job {
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
		}
		switch {
		case j.Command != "":
			c := &execjob.Command{Job: j.Name, Script: j.Command, Election: electionName, Instance: instance,
				KillGrace: killGrace(f), Logger: log}
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
