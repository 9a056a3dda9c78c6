package main

import (
	_ "embed"

	"github.com/batonhq/baton/internal/jobsfile"
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
