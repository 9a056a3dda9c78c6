package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/ledger"
)

func (c *client) status(ctx context.Context, history int) (*httpapi.Status, []byte, error) {
	path := "/status"
	if history > 0 {
		path += "?history=" + strconv.Itoa(history)
	}
	raw, _, err := c.do(ctx, http.MethodGet, path, nil, nil, false)
	if err != nil {
		return nil, nil, err
	}
	var st httpapi.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, nil, fmt.Errorf("GET %s/status: %w", c.base, err)
	}
	return &st, raw, nil
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlagSet("status")
	if _, err := c.parse(fs, args, 0, stdout, stderr); err != nil {
		return err
	}
	// The last run is the cluster's, from the ledger (?history=1): a
	// follower's own last run is that of its last term, if any.
	st, raw, err := c.status(ctx, 1)
	if err != nil {
		return err
	}
	return c.print(raw, func(w io.Writer) error {
		fmt.Fprintf(w, "election:\t%s on %s (%s)\n", st.Election, st.Backend, st.Where)
		role := st.Role
		if st.Term != nil {
			role += fmt.Sprintf(", token %d since %s", st.Term.Token, when(st.Term.Since))
		}
		fmt.Fprintf(w, "node:\t%s: %s\n", st.Identity.ID, role)
		leader := "nobody"
		if st.Leader != nil {
			leader = fmt.Sprintf("%s (token %d)", st.Leader.Identity.ID, st.Leader.Token)
		}
		if st.LeaderErr != "" {
			leader += " (" + st.LeaderErr + ")"
		}
		fmt.Fprintf(w, "leader:\t%s\n", leader)
		fmt.Fprintf(w, "eligible:\t%v\thealthy: %v\tready: %v\trunning: %d\n", st.Eligible, st.Healthy, st.Ready, st.Running)
		if st.NotEligible != "" {
			fmt.Fprintf(w, "not eligible:\t%s\n", st.NotEligible)
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "JOB\tSCHEDULE\tNEXT\tLAST RUN\tRESULT\tPAUSED")
		for _, j := range st.Jobs {
			last, result := "-", "-"
			switch {
			case len(j.History) > 0:
				last, result = when(j.History[0].Tick), string(j.History[0].Result)
			case j.HistoryErr != "" && j.LastRun != nil: // the ledger did not answer: this node's own
				last, result = when(j.LastRun.Tick)+" (this node's)", string(j.LastRun.Result)
			}
			next, paused := when(j.Next), "-"
			if j.Paused != nil {
				next = "paused" // every leader skips its ticks until resumed
				paused = "by " + j.Paused.By + " at " + when(j.Paused.At)
				if j.Paused.Note != "" {
					paused += ": " + j.Paused.Note
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", j.Name, j.Schedule, next, last, result, paused)
		}
		if len(st.Instances) > 0 {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "INSTANCE\tLIVE\tLEADER\tELIGIBLE\tVERSION\tJOB SET\tADDRESS")
			for _, in := range st.Instances {
				set := "same"
				if in.JobsDiffer {
					set = "DIFFERS from the leader's"
				}
				fmt.Fprintf(w, "%s\t%v\t%v\t%v\t%s\t%s\t%s\n", in.ID, in.Live, in.Leader, in.Eligible, in.Version, set, in.Address)
			}
		}
		if st.ControlErr != "" {
			fmt.Fprintf(w, "\ncontrol store: %s\n", st.ControlErr)
		}
		return nil
	})
}

func runHistory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlagSet("history")
	job := fs.String("job", "", "only this job")
	n := fs.Int("n", 10, "runs per job, newest first (at most 50)")
	if _, err := c.parse(fs, args, 0, stdout, stderr); err != nil {
		return err
	}
	if *n < 1 {
		return fmt.Errorf("--n %d: want at least 1", *n)
	}
	st, raw, err := c.status(ctx, *n)
	if err != nil {
		return err
	}
	var jobs []httpapi.StatusJob
	for _, j := range st.Jobs {
		if *job == "" || j.Name == *job {
			jobs = append(jobs, j)
		}
	}
	if *job != "" && len(jobs) == 0 {
		return fmt.Errorf("baton history: job %q: not in the job set of %s", *job, st.Identity.ID)
	}
	if c.json {
		out, err := json.Marshal(jobs)
		if err != nil {
			return err
		}
		raw = out
	}
	return c.print(raw, func(w io.Writer) error {
		fmt.Fprintln(w, "JOB\tTICK\tKIND\tINSTANCE\tTOKEN\tRESULT\tATTEMPTS\tTOOK\tERROR")
		var errs []error
		for _, j := range jobs {
			if j.HistoryErr != "" {
				errs = append(errs, fmt.Errorf("job %q: %s", j.Name, j.HistoryErr))
			}
			for _, r := range j.History {
				fmt.Fprintln(w, historyLine(r))
			}
		}
		return errors.Join(errs...)
	})
}

func historyLine(r ledger.Run) string {
	took := "-"
	if !r.Ended.IsZero() {
		took = r.Ended.Sub(r.Started).Round(time.Millisecond).String()
	}
	msg := strings.ReplaceAll(r.Error, "\n", " ")
	if len(msg) > 80 {
		msg = msg[:77] + "..."
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s", r.Job, when(r.Tick), r.Kind(), r.Instance, r.Token, r.Result, max(1, r.Attempts), took, msg)
}
