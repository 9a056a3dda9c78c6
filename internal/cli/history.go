package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// History prints the recent runs of each job from the backend's ledger
// (`demo history`).
func (p *Program) History(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, bf, lf := backendFlagSet("history")
	var jobs stringList
	fs.Var(&jobs, "job", "job to show (repeatable; default: every job of --config)")
	config := fs.String("config", "", "jobs file naming the jobs"+p.defaultJobsHelp())
	n := fs.Int("n", ledger.DefaultHistory, "runs per job, newest first")
	if err := p.ParseFlags(fs, args, stderr); err != nil {
		return err
	}
	log, err := lf.Logger(stderr)
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		f, err := p.LoadJobs(*config)
		if err != nil {
			return err
		}
		for _, j := range f.Jobs {
			jobs = append(jobs, j.Name)
		}
	}
	o, err := bf.Open(ctx, election.Timing{}, 0, log)
	if err != nil {
		return err
	}
	defer o.Close()
	if o.Ledger == nil {
		return fmt.Errorf("%s history: the %s backend keeps no ledger", p.Name, bf.Kind)
	}
	leader := leaderToken(ctx, o.Backend)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tTICK\tCATCH-UP\tINSTANCE\tTOKEN\tRESULT\tTOOK\tERROR")
	var errs []error
	for _, job := range jobs {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		runs, err := o.Ledger.History(qctx, job, *n)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s history: job %q: %w", p.Name, job, err))
			continue
		}
		schedulerhost.MarkSettling(runs, leader) // the next leader settles them
		for _, r := range runs {
			took := "-"
			if !r.Ended.IsZero() {
				took = r.Ended.Sub(r.Started).Round(time.Millisecond).String()
			}
			tick := r.Tick.UTC().Format(time.RFC3339)
			catchUp := "-"
			if r.CatchUp {
				catchUp = "yes"
			}
			msg := strings.ReplaceAll(r.Error, "\n", " ")
			if len(msg) > 80 {
				msg = msg[:77] + "..."
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Job, tick, catchUp, r.Instance, r.Token, r.Result, took, msg)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// leaderToken returns the token of the term leading now, 0 if nobody
// leads or the backend cannot tell.
func leaderToken(ctx context.Context, b election.Backend) uint64 {
	lr, ok := b.(interface {
		Leader(context.Context) (election.LeaderInfo, error)
	})
	if !ok {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	li, err := lr.Leader(ctx)
	if err != nil {
		return 0
	}
	return li.Token
}
