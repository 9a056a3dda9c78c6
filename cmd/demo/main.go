// Command demo runs baton: a local cluster on an embedded etcd, single
// instances on any backend, and the run history.
//
//	demo cluster [--nodes 3] [--config FILE]      embedded etcd + N `demo node` processes
//	demo node --backend etcd|postgres|mysql|consul|redis --election NAME --id ID --config FILE
//	demo history --backend ... --election NAME [--job J]
//
// SIGINT or SIGTERM stops gracefully (runs drain, the lease is released);
// a second one exits at once with status 2. SIGHUP to `demo node`
// re-reads its jobs file (as POST /reload does), keeping the lease.
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
)

// main runs the command under a context that SIGINT and SIGTERM end (a
// second signal: run's own watch, WatchSecondSignal), then exits with
// its status.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err, os.Stderr))
}

const usage = `usage:
  demo cluster [--nodes 3] [--config FILE] [--http-base-port N] [--log-format text|json]
      an embedded etcd and N "demo node" processes; Ctrl-C drains and stops them
  demo node --backend etcd|postgres|mysql|consul|redis [--endpoints URLS | --dsn DSN | --consul-addr ADDR | --redis-addr ADDR]
            --election NAME --id ID [--config FILE] [--http ADDR] [--standby]
            [--admin-token-file FILE] [--step-down-cooldown 30s]
            [--etcd-cacert F --etcd-cert F --etcd-key F --etcd-user U --etcd-password-file F]
            [--consul-token-file F --consul-cacert F --consul-cert F --consul-key F]
            [--redis-username U --redis-password-file F --redis-tls --redis-cacert F --redis-cert F --redis-key F]
            [--redis-sentinel ADDRS --redis-master NAME | --redis-cluster ADDRS] [--redis-wait-replicas N]
      one instance: campaigns, runs the jobs while leading; serves a status page at /,
      /status /metrics /healthz /readyz, and POST /step-down /standby /eligible /reload
      (bearer token from --admin-token-file or BATON_ADMIN_TOKEN); SIGHUP re-reads --config
  demo history --backend ... --election NAME [--job J] [--config FILE]
      the recent runs of each job, from the backend's ledger

Without --config the built-in jobs.example.yaml is used. "demo CMD -h" lists every flag.
`

// errExitNow is the cause of the context that a second SIGINT or SIGTERM
// ends; main exits with status 2 on it.
var errExitNow = cli.ErrExitNow

// demo is the demo command: its jobs file, without --config, is the
// built-in example.
var demo = &cli.Program{Name: "demo", DefaultJobs: exampleJobs, DefaultJobsName: exampleName}

// run is the whole program: it blocks until the subcommand is done or ctx
// ends and the subcommand has shut down. A second SIGINT or SIGTERM after
// the one that ended ctx makes it return errExitNow at once: a node does
// not wait for its drain, a cluster kills its nodes first.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("demo: a subcommand is required")
	}
	now, stopWatch := cli.WatchSecondSignal("demo", stderr)
	defer stopWatch()
	switch args[0] {
	case "cluster":
		return runCluster(ctx, now, args[1:], stdout, stderr)
	case "node":
		return cli.OrExitNow(now, func() error { return demo.Node(ctx, "node", args[1:], stdout, stderr) })
	case "history":
		return cli.OrExitNow(now, func() error { return demo.History(ctx, args[1:], stdout, stderr) })
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("demo: unknown subcommand %q", args[0])
}
