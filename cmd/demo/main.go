// Command demo runs baton: a local cluster on an embedded etcd, single
// instances on any backend, and the run history.
//
//	demo cluster [--nodes 3] [--config FILE]      embedded etcd + N `demo node` processes
//	demo node --backend etcd|postgres|mysql|consul --election NAME --id ID --config FILE
//	demo history --backend ... --election NAME [--job J]
//
// SIGINT or SIGTERM stops gracefully (runs drain, the lease is released);
// a second one exits at once with status 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"go.uber.org/zap"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	second := make(chan os.Signal, 2)
	signal.Notify(second, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-second // the first one, also seen by ctx
		s := <-second
		fmt.Fprintf(os.Stderr, "demo: second signal (%v): exiting now\n", s)
		runExitHooks()
		os.Exit(2)
	}()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

const usage = `usage:
  demo cluster [--nodes 3] [--config FILE] [--http-base-port N] [--log-format text|json]
      an embedded etcd and N "demo node" processes; Ctrl-C drains and stops them
  demo node --backend etcd|postgres|mysql|consul [--endpoints URLS | --dsn DSN | --consul-addr ADDR]
            --election NAME --id ID [--config FILE] [--http ADDR] [--standby]
            [--admin-token-file FILE] [--step-down-cooldown 30s]
            [--etcd-cacert F --etcd-cert F --etcd-key F --etcd-user U --etcd-password-file F]
            [--consul-token-file F --consul-cacert F --consul-cert F --consul-key F]
      one instance: campaigns, runs the jobs while leading; serves a status page at /,
      /status /metrics /healthz /readyz, and POST /step-down /standby /eligible
      (bearer token from --admin-token-file or BATON_ADMIN_TOKEN)
  demo history --backend ... --election NAME [--job J] [--config FILE]
      the recent runs of each job, from the backend's ledger

Without --config the built-in jobs.example.yaml is used. "demo CMD -h" lists every flag.
`

// run is the whole program: it blocks until the subcommand is done or ctx
// ends and the subcommand has shut down.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("demo: a subcommand is required")
	}
	switch args[0] {
	case "cluster":
		return runCluster(ctx, args[1:], stdout, stderr)
	case "node":
		return runNode(ctx, args[1:], stdout, stderr)
	case "history":
		return runHistory(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("demo: unknown subcommand %q", args[0])
}

var (
	exitMu    sync.Mutex
	exitHooks []func()
)

// onExitNow registers f to run when a second signal makes the process exit
// at once. It returns a function that unregisters f.
func onExitNow(f func()) (remove func()) {
	exitMu.Lock()
	defer exitMu.Unlock()
	exitHooks = append(exitHooks, f)
	i := len(exitHooks) - 1
	return func() {
		exitMu.Lock()
		defer exitMu.Unlock()
		exitHooks[i] = nil
	}
}

func runExitHooks() {
	exitMu.Lock()
	defer exitMu.Unlock()
	for _, f := range exitHooks {
		if f != nil {
			f()
		}
	}
}

// logFlags are the logging flags of every subcommand.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
}

// logger returns a logger writing to w. The keys of baton's records are
// fixed: election, identity, token, job, tick, took, err.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(l.format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
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

// nopZap silences the etcd client's own logger.
func nopZap() *zap.Logger { return zap.NewNop() }
