package main

import _ "embed"

// exampleJobs is jobs.example.yaml, used when no --config is given.
//
//go:embed jobs.example.yaml
var exampleJobs []byte

const exampleName = "jobs.example.yaml (built in)"
