package main

import (
	"flag"

	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/jobsfile"
)

// registerLockBackendFlags defines bf's flags on fs but --election: the
// lock's NAME is the election.
func registerLockBackendFlags(fs *flag.FlagSet, bf *cli.BackendFlags) {
	all := flag.NewFlagSet("", flag.ContinueOnError)
	bf.Register(all)
	all.VisitAll(func(f *flag.Flag) {
		if f.Name != "election" {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
}

// applyLockConfig sets the backend section of the config file at path
// under the flags of the command line. An empty path does nothing.
func applyLockConfig(fs *flag.FlagSet, path string) error {
	if path == "" {
		return nil
	}
	f, err := jobsfile.Load(path)
	if err != nil {
		return err
	}
	return cli.ApplyBackendSection(fs, f)
}
