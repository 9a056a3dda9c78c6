// Command baton runs scheduled jobs exactly once across the instances of
// a service, in any language: run it beside each instance, and the one
// that leads the election calls the job endpoints of its instance.
//
//	baton run --config baton.yaml          the sidecar: campaign, run the jobs while leading
//	baton lock [backend flags] NAME -- CMD  run one command while holding an election
//	baton status|history|audit              what a node says, read from its HTTP API
//	baton pause|resume|trigger JOB          job control, through any node
//	baton step-down|standby|eligible        leadership control of one node
//
// SIGINT or SIGTERM stops `baton run` gracefully (runs drain, the lease is
// released); a second one exits at once with status 2. SIGHUP re-reads
// the config file's jobs, keeping the lease.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/execjob"
)

// Every child process of baton is started by internal/execjob, so it may
// be a subreaper where runs get no cgroup (execjob.AllowSubreaper).
// main runs the command under a context that SIGINT and SIGTERM end (a
// second signal: run's own watch, WatchSecondSignal), then exits with
// its status.
func main() {
	execjob.AllowSubreaper()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err, os.Stderr))
}

// baton is the program's shared part: no built-in jobs, --config is
// required.
var baton = &cli.Program{Name: "baton", DefaultHTTP: cli.DefaultBatonHTTP}

const usage = `usage: baton COMMAND [flags]

Run beside each instance of a service:
  run       campaign for leadership and run the config file's jobs while leading
            (HTTP requests to your service, shell commands); serves /status,
            /metrics, /healthz, /readyz and the admin API
  lock      run one command while holding an election: baton lock NAME -- CMD ARGS...

Talk to a running node (--node URL, default $BATON_NODE, else node.http of the
config file (--config, $BATON_CONFIG or ./baton.yaml), else ` + defaultNode + `):
  status     who leads, this node's role, its jobs and instances
  history    the recent runs of each job
  audit      every due tick of each job and what became of it: baton audit
             [--job JOB] [--window 24h]; the ticks that did not run ok
  pause      pause a job across the cluster: baton pause JOB [--note TEXT]
  resume     resume a paused job: baton resume JOB [--run-missed]
  trigger    run a job now, on the leader: baton trigger JOB [--request-id ID] [--wait]
  step-down  the node hands leadership over and does not campaign for a while
  standby    the node stops campaigning (it keeps leading until step-down)
  eligible   the node campaigns again

  version    this binary's version, commit and build date (also --version)
  help       this text

"baton COMMAND -h" lists the flags of a command. The admin commands send the
token of --admin-token-file, $BATON_ADMIN_TOKEN_FILE, $BATON_ADMIN_TOKEN, or the
config file's node.admin_token_file.
`

// commands are the subcommands, for dispatch and for the test that checks
// that --help lists each.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"run": func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return baton.Node(ctx, "run", args, stdout, stderr)
	},
	"lock":      runLock,
	"status":    runStatus,
	"history":   runHistory,
	"audit":     runAudit,
	"pause":     runPause,
	"resume":    runResume,
	"trigger":   runTrigger,
	"step-down": runStepDown,
	"standby": func(ctx context.Context, a []string, o, e io.Writer) error {
		return runEligible(ctx, "standby", a, o, e)
	},
	"eligible": func(ctx context.Context, a []string, o, e io.Writer) error {
		return runEligible(ctx, "eligible", a, o, e)
	},
	"version": func(_ context.Context, _ []string, stdout, _ io.Writer) error {
		fmt.Fprintln(stdout, cli.VersionLine())
		return nil
	},
}

// run is the whole program. A second SIGINT or SIGTERM after the one that
// ended ctx makes it return cli.ErrExitNow at once.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("baton: a command is required")
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "--version", "-version":
		args = []string{"version"}
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("baton: unknown command %q", args[0])
	}
	if args[0] == "lock" {
		return cmd(ctx, args[1:], stdout, stderr) // lock handles signals itself: they go to its command
	}
	now, stopWatch := cli.WatchSecondSignal("baton", stderr)
	defer stopWatch()
	return cli.OrExitNow(now, func() error { return cmd(ctx, args[1:], stdout, stderr) })
}
