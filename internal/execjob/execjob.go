// Package execjob runs a shell command as a scheduled job: /bin/sh -c in a
// process group of its own (and on Linux a cgroup of its own where one can
// be made: Procs), its output logged line by line, with the run's
// identity in its environment, and stopped when the run is cancelled.
// Stopping a run stops every process it started, in its process group or
// not (setsid, a double fork, a daemon).
//
// A graceful stop (the lease still held: a shutdown timeout, a job's
// timeout) sends SIGTERM, then SIGKILL after KillGrace. A lost term's
// processes are gone before the backend could give the lease to
// another instance (election.GoneBy): when the term ended at its local
// deadline, SIGTERM, then SIGKILL after the smaller of KillGrace and what
// is left until then (half the SafetyMargin after the deadline); when the
// backend ended the lease or a ledger refused a stale claim, SIGKILL at
// once. The log says which.
package execjob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/lines"
	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

// Environment variables set for every command, on top of the parent's.
// A traced run (docs/tracing.md) also gets its span as W3C Trace Context:
// TRACEPARENT, and TRACESTATE when not empty (tracing.Env).
const (
	EnvJob      = "BATON_JOB"      // the job's name
	EnvToken    = "BATON_TOKEN"    // the term's fencing token, decimal
	EnvTick     = "BATON_TICK"     // the nominal time of the tick, RFC 3339, UTC
	EnvInstance = "BATON_INSTANCE" // the identity of the instance running it
	EnvElection = "BATON_ELECTION" // the election's name
	EnvCatchUp  = "BATON_CATCH_UP" // "1" for a catch-up run (ticks missed while nobody led), else "0"
	EnvAttempt  = "BATON_ATTEMPT"  // the attempt of the tick's run, from 1 (schedulerhost.Job.Retries)
	EnvRunKind  = "BATON_RUN_KIND" // "scheduled", "catch-up" or "manual" (a run now)
	// EnvCatchUpFrom is, for a catch-up run, the earliest missed tick it
	// stands for (RFC 3339, UTC; schedulerhost.Tick.CatchUpFrom): the
	// missed ticks from it through BATON_TICK. Empty for other runs.
	EnvCatchUpFrom = "BATON_CATCH_UP_FROM"
	// A run now's request id and who asked for it (empty otherwise).
	EnvRequestID   = "BATON_REQUEST_ID"
	EnvRequestedBy = "BATON_REQUESTED_BY"
)

// MinSafetyMargin is the smallest lease SafetyMargin command jobs work
// with. A lost term's processes are killed by half the margin after
// the local deadline (election.GoneBy); 50 ms is what a loaded machine
// may take to notice the deadline and deliver SIGKILL.
const MinSafetyMargin = 100 * time.Millisecond

// Command is one shell command job. Its Run method is a
// schedulerhost.Job.Run.
type Command struct {
	// Job is the job's name, logged and passed as BATON_JOB.
	Job string
	// Script is run with /bin/sh -c.
	Script string
	// Election and Instance are passed as BATON_ELECTION and
	// BATON_INSTANCE. BATON_CATCH_UP comes from the run's tick,
	// BATON_ATTEMPT from its context (schedulerhost.AttemptFromContext).
	Election, Instance string
	// KillGrace is the time between SIGTERM and SIGKILL to the process
	// group after the run's context ends while the term holds. On a loss
	// it is cut to what the lease leaves (see the package doc). Zero means
	// schedulerhost.DefaultKillGrace.
	KillGrace time.Duration
	// Env is the environment the BATON_ variables are added to. Nil means
	// os.Environ().
	Env []string
	// Logger receives the command's output (Info, one record per line,
	// with keys job, tick, token, stream, line) and its signals. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// maxLine is the longest line logged as one record; longer lines are split.
const maxLine = 16 << 10

// orphanWait bounds how long Run waits for output after the shell exited,
// when processes it started in the background still hold its stdout.
const orphanWait = 500 * time.Millisecond

// afterStart, when set (by tests), runs right after the job's process
// has started.
var afterStart func()

// Run runs the command and blocks until it has exited and its output has
// been logged. The fencing token and tick come from ctx
// (election.TokenFromContext, schedulerhost.TickFromContext).
//
// When ctx ends before the command exits, Run sends SIGTERM to every
// process of the run (Procs), and SIGKILL KillGrace later if the shell has
// not exited by then; on a lost term, sooner or at once (see the package
// doc). When the shell exits, whatever it left running is killed, so a
// job leaves no processes behind (what the fallback of Procs cannot find
// aside, and work started on other machines). Run returns nil if
// the shell exited with status 0, an error wrapping *exec.ExitError
// otherwise.
func (c *Command) Run(ctx context.Context) error {
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	grace := c.KillGrace
	if grace <= 0 {
		grace = schedulerhost.DefaultKillGrace
	}
	token, _ := election.TokenFromContext(ctx)
	tick, _ := schedulerhost.TickFromContext(ctx)
	log = log.With("job", c.Job, "tick", tick.Time, "token", token)

	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(env[:len(env):len(env)],
		EnvJob+"="+c.Job,
		EnvToken+"="+strconv.FormatUint(token, 10),
		EnvTick+"="+tick.Time.UTC().Format(time.RFC3339),
		EnvInstance+"="+c.Instance,
		EnvElection+"="+c.Election,
		EnvCatchUp+"="+catchUp(tick),
		EnvAttempt+"="+strconv.Itoa(max(1, schedulerhost.AttemptFromContext(ctx))),
	)
	kind, from := "scheduled", ""
	if tick.CatchUp {
		kind = "catch-up"
		if !tick.CatchUpFrom.IsZero() {
			from = tick.CatchUpFrom.UTC().Format(time.RFC3339)
		}
	}
	env = append(env, EnvCatchUpFrom+"="+from)
	if m, ok := schedulerhost.ManualFromContext(ctx); ok {
		kind = "manual"
		env = append(env, EnvRequestID+"="+m.RequestID, EnvRequestedBy+"="+m.By)
	}
	env = append(env, EnvRunKind+"="+kind)
	env = append(env, tracing.Env(ctx)...) // TRACEPARENT, TRACESTATE: the run's span, if traced

	stdout := lineLogger(log, "stdout")
	stderr := lineLogger(log, "stderr")
	cmd := exec.Command("/bin/sh", "-c", c.Script)
	cmd.Env = env
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = orphanWait
	// A run whose context ended before here starts no process: a node
	// frozen between the Host's "run started" and this fork, and thawed
	// past its term's deadline, would otherwise start the job of a lost
	// term (in the kube soak, a drain run logged as started wrote its
	// first line only at the thaw, 2.5 s later, and was killed 26 ms
	// after it).
	if ctx.Err() != nil {
		return fmt.Errorf("execjob: not started: %w", context.Cause(ctx))
	}
	// If this process dies, nothing here can stop the job: the guard
	// kills its processes then (guard.go).
	procs, err := StartRun(cmd, func(err error) {
		log.Warn("the job runs without a guard: it would outlive this process", "err", err)
	})
	if err != nil {
		return fmt.Errorf("execjob: start: %w", err)
	}
	logWhereOnce(log, procs)

	exited := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-exited:
			return
		case <-ctx.Done():
		}
		stop(ctx, log, procs, grace, exited)
	})
	err = cmd.Wait()
	close(exited)
	wg.Wait()
	// Kill whatever the shell left running, in its group or not.
	if n := procs.Close(); n > 0 {
		log.Warn("killed processes the job left running", "processes", n, "in", procs.Where())
	}
	stdout.Flush()
	stderr.Flush()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // exited with 0; background processes held its output
	}
	if err != nil {
		return fmt.Errorf("execjob: %w", err)
	}
	return nil
}

var whereOnce sync.Once

// logWhereOnce logs, at the first run of this process, how the runs'
// processes are tracked, and why not in a cgroup if they are not.
func logWhereOnce(log *slog.Logger, p *Procs) {
	whereOnce.Do(func() {
		if _, err := CgroupSupport(); err != nil {
			log.Info("command jobs: no cgroup per run, so their processes are found by process group and BATON_RUN_TAG", "why", err)
			return
		}
		log.Debug("command jobs: a cgroup per run", "first", p.Where())
	})
}

func catchUp(t schedulerhost.Tick) string {
	if t.CatchUp {
		return "1"
	}
	return "0"
}

// lineLogger returns a writer that logs what is written to it, one record
// per line (at most maxLine bytes, a trailing CR dropped).
func lineLogger(log *slog.Logger, stream string) *lines.Writer {
	return &lines.Writer{Max: maxLine, Emit: func(line []byte) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		log.Info("output", "stream", stream, "line", string(line))
	}}
}
