package execjob

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	"github.com/batonhq/baton/election"
)

// stop ends the processes of a run whose context ctx has ended (procs:
// its process group and all that left it), and returns when the shell has
// exited (exited closed) or every process was SIGKILLed and is gone.
//
// A graceful stop (the term still holds: a shutdown timeout, a job's
// timeout) gets SIGTERM, then SIGKILL after grace. A lost term gets
// SIGKILL before the backend could give the lease to another candidate
// (election.GoneBy): SIGTERM and SIGKILL when the margin left allows, at
// the latest, else SIGKILL at once. A term lost during a graceful stop's
// grace shortens it the same way.
func stop(ctx context.Context, log *slog.Logger, procs *Procs, grace time.Duration, exited <-chan struct{}) {
	kill := func() { procs.Kill() }
	pgid := procs.Pgid()
	wait := grace
	leaseDone := election.LeaseDone(ctx)
	if goneBy, lost := election.GoneBy(ctx); lost {
		left := time.Until(goneBy)
		if left <= 0 {
			log.Warn("term lost: SIGKILL to the job's processes at once", "pgid", pgid, "margin_left", left.Round(time.Millisecond), "err", context.Cause(ctx))
			kill()
			return
		}
		wait = min(grace, left)
		leaseDone = nil
		log.Warn("term lost: SIGTERM to the job's processes, SIGKILL after "+wait.Round(time.Millisecond).String()+" (margin left "+left.Round(time.Millisecond).String()+")",
			"pgid", pgid, "kill_grace", grace, "margin_left", left.Round(time.Millisecond), "err", context.Cause(ctx))
	} else {
		log.Info("run cancelled: sending SIGTERM to the job's processes", "pgid", pgid, "kill_grace", grace, "err", context.Cause(ctx))
	}
	procs.Signal(syscall.SIGTERM)
	end := time.Now().Add(wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-exited:
			return
		case <-timer.C:
			log.Warn("still running after the kill grace: sending SIGKILL to the job's processes", "pgid", pgid, "kill_grace", wait.Round(time.Millisecond))
			kill()
			return
		case <-leaseDone:
			leaseDone = nil
			goneBy, lost := election.GoneBy(ctx)
			if !lost || !goneBy.Before(end) {
				continue
			}
			left := time.Until(goneBy)
			if left <= 0 {
				log.Warn("term lost: SIGKILL to the job's processes at once", "pgid", pgid, "margin_left", left.Round(time.Millisecond), "err", context.Cause(ctx))
				kill()
				return
			}
			log.Warn("term lost during the kill grace: SIGKILL after "+left.Round(time.Millisecond).String(), "pgid", pgid, "kill_grace", grace, "margin_left", left.Round(time.Millisecond))
			end, wait = goneBy, left
			timer.Reset(left)
		}
	}
}
