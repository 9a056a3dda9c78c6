package baton

import (
	"context"
	"os"
)

// RunMain is Main up to its exit, for tests.
func RunMain(ctx context.Context, cfg Config, sigs ...os.Signal) error {
	_, err := runMain(ctx, cfg, sigs...)
	return err
}

// RunMainStopped is Main up to its exit, for tests, with a channel closed
// once the instance has stopped.
var RunMainStopped = runMain

// ErrExitNow is RunMain's error after a second signal.
var ErrExitNow = errExitNow

// InstanceOf is the identity b campaigns with: Config.Instance, or the
// default New chose.
func InstanceOf(b *Baton) string { return b.elector.Identity().ID }

// RunningOf is how many runs of b's jobs have started and not returned.
func RunningOf(b *Baton) int { return b.host.Running() }
