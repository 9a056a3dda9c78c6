package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/httpapi"
)

// runAudit: baton audit [--job NAME] [--window 24h], the tick accounting
// of the node's jobs (GET /audit): a line of counts per job, then the
// ranges of ticks that did not run ok.
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlagSet("audit")
	job := fs.String("job", "", "only this job (default: every job of the node)")
	window := fs.Duration("window", httpapi.DefaultAuditWindow, "the window, ending now")
	if _, err := c.parse(fs, args, 0, stdout, stderr); err != nil {
		return err
	}
	if *window <= 0 || *window > httpapi.MaxAuditWindow {
		return fmt.Errorf("--window %v: want a duration above 0 and at most %v", *window, httpapi.MaxAuditWindow)
	}
	q := url.Values{"window": {window.String()}}
	if *job != "" {
		q.Set("job", *job)
	}
	raw, _, err := c.do(ctx, http.MethodGet, "/audit?"+q.Encode(), nil, nil, false)
	if err != nil {
		return err
	}
	var rep httpapi.AuditReply
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("GET %s/audit: %w", c.base, err)
	}
	return c.print(raw, func(w io.Writer) error {
		for _, r := range rep.Reports {
			fmt.Fprintln(w, auditLine(r))
		}
		var notOK []string
		for _, r := range rep.Reports {
			for _, n := range r.NotOK {
				notOK = append(notOK, notOKLine(r.Job, n))
			}
		}
		if len(notOK) > 0 {
			fmt.Fprintln(w, "\nJOB\tCLASS/REASON\tFIRST\tLAST\tCOUNT\tTOKEN\tINSTANCE\tERROR")
			for _, l := range notOK {
				fmt.Fprintln(w, l)
			}
		}
		return nil
	})
}

// lineClasses are the classes of a job's line, in the status page's
// order.
var lineClasses = []audit.Class{audit.Ran, audit.Covered, audit.Skipped, audit.Missed, audit.Refused, audit.Lost, audit.Pending}

// auditLine is a report's counts: "JOB\tdue N\tran M\t...".
func auditLine(r audit.Report) string {
	parts := []string{r.Job, fmt.Sprintf("due %d", r.Due)}
	for _, c := range lineClasses {
		parts = append(parts, fmt.Sprintf("%s %d", c, r.Classes[c]))
	}
	if r.Folded > 0 {
		parts = append(parts, fmt.Sprintf("folded %d", r.Folded))
	}
	return strings.Join(parts, "\t")
}

// notOKLine is one range of ticks that did not run ok.
func notOKLine(job string, n audit.Range) string {
	token, inst := "-", "-"
	if n.Token != 0 {
		token = fmt.Sprint(n.Token)
	}
	if n.Instance != "" {
		inst = n.Instance
	}
	var why []string
	if n.Error != "" {
		why = append(why, strings.ReplaceAll(n.Error, "\n", " "))
	}
	if n.Attempts > 1 {
		why = append(why, fmt.Sprintf("%d attempts", n.Attempts))
	}
	if !n.By.IsZero() {
		why = append(why, "covered by the run of "+when(n.By))
	}
	if !n.NobodyFrom.IsZero() || !n.NobodyUntil.IsZero() {
		why = append(why, "nobody led "+when(n.NobodyFrom)+" .. "+when(n.NobodyUntil))
	}
	msg := strings.Join(why, "; ")
	if len(msg) > 120 {
		msg = msg[:117] + "..."
	}
	if msg == "" {
		msg = "-"
	}
	return fmt.Sprintf("%s\t%s/%s\t%s\t%s\t%d\t%s\t%s\t%s", job, n.Class, n.Reason, when(n.First), when(n.Last), n.Count, token, inst, msg)
}
