package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/execjob"
)

// DefaultLockKillGrace is the default of baton lock --kill-grace.
const DefaultLockKillGrace = time.Second

// runLock is `baton lock [flags] NAME -- CMD ARGS...`: it waits for the
// election NAME, runs CMD while holding it, and exits with CMD's status.
// On etcd and Consul, NAME is the key prefix itself, as etcdctl lock and
// consul lock take it, so that the three exclude each other.
//
// SIGINT, SIGTERM and SIGHUP go to the command's process group while it
// runs (and baton waits for it); before the lock is held they stop the
// wait. On loss of the lock the command is gone before the backend could
// give the lease to another holder (election.GoneBy): SIGKILL at once when
// the backend ended the lease, else SIGTERM, then SIGKILL after the
// smaller of --kill-grace and what is left of the margin. The lease is
// released when the command exits.
func runLock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bf, lf := new(cli.BackendFlags), new(cli.LogFlags)
	registerLockBackendFlags(fs, bf)
	lf.Register(fs)
	config := fs.String("config", "", "config file whose backend section gives the backend flags (the command line's win)")
	// Quiet unless something goes wrong: the output is the command's.
	if f := fs.Lookup("log-level"); f != nil {
		f.DefValue = "warn"
		_ = f.Value.Set("warn")
	}
	id := fs.String("id", "", "identity in the election (default HOSTNAME-PID)")
	ttl := fs.Duration("ttl", 0, "lease TTL (default: the backend's)")
	grace := fs.Duration("kill-grace", DefaultLockKillGrace, "after losing the lock: SIGTERM to the command, then SIGKILL after this at most (less when the lease could pass sooner; at once when the backend ended it)")
	timeout := fs.Duration("timeout", 0, "give up (status 1) if the lock is not held within this (0: wait as long as it takes)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: baton lock [flags] NAME -- CMD [ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyLockConfig(fs, *config); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) < 1 {
		return errors.New("baton lock: want a lock name and a command: baton lock NAME -- CMD [ARGS...]")
	}
	name, argv := rest[0], rest[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return fmt.Errorf("baton lock %s: no command: baton lock NAME -- CMD [ARGS...]", name)
	}
	if *grace < 0 || *timeout < 0 || *ttl < 0 {
		return errors.New("baton lock: --kill-grace, --timeout and --ttl must not be negative")
	}
	log, err := lf.Logger(stderr)
	if err != nil {
		return err
	}
	if *id == "" {
		host, _ := os.Hostname()
		*id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	bf.Election, bf.RawName = name, true

	// Signals are the command's once it runs; before, they stop the wait.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	o, err := bf.Open(context.Background(), election.Timing{TTL: *ttl}, 0, log)
	if err != nil {
		return err
	}
	defer o.Close()
	el, err := election.New(election.Config{Backend: o.Backend, Identity: election.Identity{ID: *id}, Election: name, Logger: log})
	if err != nil {
		return err
	}

	runCtx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	held := make(chan struct{})
	var status int
	var cmdErr error
	errc := make(chan error, 1)
	go func() {
		errc <- el.Run(runCtx, func(_ context.Context, term election.Term) error {
			close(held)
			defer stop(nil) // one term: when the command is done, release and return
			if err := term.Check(); err != nil {
				cmdErr = fmt.Errorf("baton lock %s: lost before the command started: %w", name, err)
				return nil
			}
			status, cmdErr = runLocked(term, name, *id, argv, *grace, sigs, stdout, stderr)
			return nil
		})
	}()

	var deadline <-chan time.Time
	if *timeout > 0 {
		t := time.NewTimer(*timeout)
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-held:
	case err := <-errc:
		return fmt.Errorf("baton lock %s: %w", name, err)
	case s := <-sigs:
		stop(errors.New("interrupted"))
		<-errc
		return &cli.ExitError{Code: 1, Msg: fmt.Sprintf("baton lock %s: %v while waiting for the lock", name, s)}
	case <-deadline:
		stop(errors.New("timeout"))
		<-errc
		return &cli.ExitError{Code: 1, Msg: fmt.Sprintf("baton lock %s: not held within --timeout %v", name, *timeout)}
	}
	if err := <-errc; err != nil { // released by now
		return fmt.Errorf("baton lock %s: %w", name, err)
	}
	if cmdErr != nil {
		fmt.Fprintln(stderr, cmdErr)
		if status == 0 {
			status = 1
		}
	}
	if status != 0 {
		return &cli.ExitError{Code: status}
	}
	return nil
}

// runLocked runs argv under term and returns its exit status (128+N when
// signal N ended it), forwarding sigs to its process group, and stopping
// it when the term ends: SIGTERM, then SIGKILL after grace, bounded on a
// loss by the term's election.GoneBy, to every process it started, in its
// group or not (execjob.Procs). When it exits, what it left running is
// killed. The error says why the command was
// stopped, if it was.
func runLocked(term election.Term, name, id string, argv []string, grace time.Duration, sigs <-chan os.Signal, stdout, stderr io.Writer) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(),
		execjob.EnvToken+"="+strconv.FormatUint(term.Token(), 10),
		execjob.EnvElection+"="+name,
		execjob.EnvInstance+"="+id,
	)
	// If baton lock dies, the guard kills the command's processes.
	procs, err := execjob.StartRun(cmd, func(err error) {
		fmt.Fprintf(stderr, "baton lock %s: %v: the command would outlive baton lock\n", name, err)
	})
	if err != nil {
		return 127, fmt.Errorf("baton lock %s: %w", name, err)
	}
	pgid := procs.Pgid()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var why error
	var killWhy string
	var kill <-chan time.Time
	lost := term.Context().Done()
	for {
		select {
		case s := <-sigs:
			_ = syscall.Kill(-pgid, s.(syscall.Signal))
		case <-lost:
			lost = nil
			cause := context.Cause(term.Context())
			wait, left, isLost := grace, time.Duration(0), false
			if goneBy, ok := election.GoneBy(term.Context()); ok {
				left, isLost = time.Until(goneBy), true
				wait = min(grace, left)
			}
			if isLost && wait <= 0 {
				procs.Kill()
				why = fmt.Errorf("baton lock %s: lock lost (%v): SIGKILL to the command at once", name, cause)
				fmt.Fprintln(stderr, why)
				continue
			}
			why = fmt.Errorf("baton lock %s: lock lost (%v): sent SIGTERM to the command", name, cause)
			if isLost && wait < grace {
				why = fmt.Errorf("%w, SIGKILL after %v (margin left %v)", why, wait.Round(time.Millisecond), left.Round(time.Millisecond))
			}
			fmt.Fprintln(stderr, why)
			procs.Signal(syscall.SIGTERM)
			t := time.NewTimer(wait)
			defer t.Stop()
			kill = t.C
			killWhy = "SIGKILL after --kill-grace " + grace.String()
			if wait < grace {
				killWhy = "SIGKILL after " + wait.Round(time.Millisecond).String() + ", before the lease could pass"
			}
		case <-kill:
			kill = nil
			why = fmt.Errorf("%w; %s", why, killWhy)
			procs.Kill()
		case <-done:
			procs.Close() // what it left running, in its group or not
			st := cmd.ProcessState
			if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal()), why
			}
			return st.ExitCode(), why
		}
	}
}
