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
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return
	case errors.Is(err, errExitNow):
		os.Exit(2) // run has said why
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
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
var errExitNow = errors.New("demo: second signal: exiting now")

// run is the whole program: it blocks until the subcommand is done or ctx
// ends and the subcommand has shut down. A second SIGINT or SIGTERM after
// the one that ended ctx makes it return errExitNow at once: a node does
// not wait for its drain, a cluster kills its nodes first.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("demo: a subcommand is required")
	}
	now, stopWatch := watchSecondSignal(stderr)
	defer stopWatch()
	switch args[0] {
	case "cluster":
		return runCluster(ctx, now, args[1:], stdout, stderr)
	case "node":
		return orExitNow(now, func() error { return runNode(ctx, args[1:], stdout, stderr) })
	case "history":
		return orExitNow(now, func() error { return runHistory(ctx, args[1:], stdout, stderr) })
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("demo: unknown subcommand %q", args[0])
}

// watchSecondSignal returns a context that ends, with cause errExitNow, at
// the second SIGINT or SIGTERM from now on (the first one is main's, which
// ends run's ctx). A goroutine owned by the returned stop function waits
// for the signals; stop ends it and waits for it.
func watchSecondSignal(stderr io.Writer) (now context.Context, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	now, cancel := context.WithCancelCause(context.Background())
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for seen := 0; ; {
			select {
			case <-quit:
				return
			case s := <-sigs:
				if seen++; seen == 2 {
					fmt.Fprintf(stderr, "demo: second signal (%v): exiting now\n", s)
					cancel(errExitNow)
					return
				}
			}
		}
	}()
	return now, func() {
		signal.Stop(sigs)
		close(quit)
		<-done
		cancel(nil)
	}
}

// orExitNow calls f on a goroutine of its own and returns f's error, or
// the cause of now as soon as now ends, without waiting for f: the process
// is about to exit, and nothing of f needs to be cleaned up first.
func orExitNow(now context.Context, f func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- f() }()
	select {
	case err := <-errc:
		return err
	case <-now.Done():
		return context.Cause(now)
	}
}

// parseFlags parses args into fs, which writes its usage to stderr.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("demo %s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
