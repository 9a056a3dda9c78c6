// Package cli is the code the baton and demo commands share: running a
// node from a config file, flags and BATON_* variables, reading the
// history, and the handling of a second signal.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/batonhq/baton/internal/execjob"
	"github.com/batonhq/baton/internal/jobsfile"
)

// Program is one command: its name in messages, and its jobs file when
// --config is not given.
type Program struct {
	// Name is the command's name: "baton" or "demo".
	Name string
	// DefaultJobs is the jobs file used without --config, named
	// DefaultJobsName in errors; nil makes --config and the election's
	// name required (the demo's default election is "demo").
	DefaultJobs     []byte
	DefaultJobsName string
	// DefaultHTTP is the default of --http; "" means 127.0.0.1:0 (any
	// free port, as the demo's nodes use).
	DefaultHTTP string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// DefaultBatonHTTP is the default --http of `baton run`, and so the
// default node of the client commands.
const DefaultBatonHTTP = "127.0.0.1:7117"

func (p *Program) getenv() func(string) string {
	if p.Getenv != nil {
		return p.Getenv
	}
	return osGetenv
}

func (p *Program) configHelp() string {
	return "config file: the jobs, and the election, backend and node settings (env " + EnvName("config") + ")" + p.defaultJobsHelp()
}

func (p *Program) defaultJobsHelp() string {
	if p.DefaultJobs == nil {
		return ""
	}
	return "\n(default: the built-in " + p.DefaultJobsName + ")"
}

// LoadJobs reads path, or the built-in jobs when path is empty.
func (p *Program) LoadJobs(path string) (*jobsfile.File, error) {
	if path != "" {
		return jobsfile.Load(path)
	}
	if p.DefaultJobs == nil {
		return nil, fmt.Errorf("%s: --config is required (or $%s): the file with the jobs and the backend settings", p.Name, EnvName("config"))
	}
	return jobsfile.Parse(p.DefaultJobsName, p.DefaultJobs)
}

// ParseFlags parses args into fs, which writes its usage to stderr.
func (p *Program) ParseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s %s: unexpected argument %q", p.Name, fs.Name(), fs.Arg(0))
	}
	return nil
}

// flagSet reports whether flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// ErrExitNow is the cause of the context that a second SIGINT or SIGTERM
// ends; main exits with status 2 on it.
var ErrExitNow = errors.New("second signal: exiting now")

// WatchSecondSignal returns a context that ends, with cause ErrExitNow, at
// the second SIGINT or SIGTERM from now on (the first one is main's, which
// ends the command's ctx). Before it ends, every process of the command
// jobs' runs, in their process groups or not, is killed and gone
// (execjob.KillAll): the exit cannot wait for the runs' own stops, and
// nothing of a run may outlive it. A goroutine owned by the returned stop
// function waits for the signals; stop ends it and waits for it.
func WatchSecondSignal(name string, stderr io.Writer) (now context.Context, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	exiting := make(chan struct{}) // closed at the second signal, before the kill
	now, cancel := context.WithCancelCause(context.WithValue(context.Background(), exitingKey{}, exiting))
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for seen := 0; ; {
			select {
			case <-quit:
				return
			case s := <-sigs:
				if seen++; seen == 2 {
					close(exiting) // the command may end of the kill: OrExitNow waits for now
					n := execjob.KillAll()
					fmt.Fprintf(stderr, "%s: second signal (%v): killed the %d processes of the runs in flight; exiting now\n", name, s, n)
					cancel(ErrExitNow)
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

// exitingKey keys the channel, in WatchSecondSignal's context, that
// closes when the second signal is seen.
type exitingKey struct{}

// OrExitNow calls f on a goroutine of its own and returns f's error, or
// the cause of now as soon as now ends, without waiting for f: the process
// is about to exit, and nothing of f needs to be cleaned up first. An f
// that returns after the second signal was seen (its runs were killed, so
// it may return at once and before now ends) does not win: the cause of
// now is returned once the kill is done.
func OrExitNow(now context.Context, f func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- f() }()
	select {
	case err := <-errc:
		if exiting, ok := now.Value(exitingKey{}).(chan struct{}); ok {
			select {
			case <-exiting:
				<-now.Done()
				return context.Cause(now)
			default:
			}
		}
		return err
	case <-now.Done():
		return context.Cause(now)
	}
}

// ExitError is an exit status to pass on, with a message for stderr (if
// not empty): `baton lock` exits with its command's status.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d: %s", e.Code, e.Msg) }

// ExitCode is the exit status of a command whose run function returned
// err, and writes what stderr should say: 0 on success or -h, 2 after a
// second signal (run has said why), an ExitError's code (with its
// message), else 1 with the error. A command's main calls it, then
// os.Exit.
func ExitCode(err error, stderr io.Writer) int {
	var ex *ExitError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ex):
		if ex.Msg != "" {
			fmt.Fprintln(stderr, ex.Msg)
		}
		return ex.Code
	case errors.Is(err, ErrExitNow):
		return 2
	}
	fmt.Fprintln(stderr, err)
	return 1
}
