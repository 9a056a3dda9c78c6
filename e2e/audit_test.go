package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/e2e/internal/auditcmp"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
)

// auditEnv sets the comparison of each scenario's tick accounting with
// the checker's verdicts (auditcmp): unset or "1" compares and fails the
// test on a disagreement; "report" compares and prints the figures and
// the disagreements without failing (to survey a new fault); "0", no
// comparison.
const auditEnv = "BATON_E2E_AUDIT"

// auditor reads a scenario's tick accounting from the test process, as
// any instance may: a schedulerhost.Host with the scenario's jobs on the
// backend's ledger and control store, connected to the servers directly
// (no proxy, so no fault cuts it off), which never campaigns. It is made
// before the checked window starts: a job whose Account holds no
// schedule yet is due from when the Host took it on.
type auditor struct {
	mode string
	host *schedulerhost.Host
}

// startAuditor returns the scenario's auditor, nil if the comparison is
// off or the scenario's nodes are sidecars (their jobs are in configs of
// their own). A backend it cannot open is a problem.
func (sc *scenario) startAuditor() *auditor {
	mode := os.Getenv(auditEnv)
	switch mode {
	case "0":
		return nil
	case "":
		mode = "1"
	case "1", "report":
	default:
		sc.t.Fatalf("%s %q: want 1 (compare, fail on a disagreement: the default), report (compare and print) or 0 (off)", auditEnv, mode)
	}
	if sc.sidecar != nil {
		return nil
	}
	var bf cli.BackendFlags
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bf.Register(fs)
	if err := fs.Parse(append(sc.be.args(sc.be.targetsOf(0)), "--election", sc.election)); err != nil {
		sc.t.Fatalf("audit: the backend's flags: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	o, err := bf.Open(ctx, election.Timing{}, 0, quiet)
	if err != nil {
		sc.problem("audit: open the backend: %v", err)
		return nil
	}
	if o.Control == nil || o.Ledger == nil {
		o.Close()
		sc.problem("audit: backend %s has no control store or no ledger", sc.be.name)
		return nil
	}
	f, err := jobsfile.Load(sc.jobsPath)
	if err != nil {
		o.Close()
		sc.t.Fatalf("audit: %v", err)
	}
	var jobs []schedulerhost.Job
	for _, j := range f.Jobs {
		jobs = append(jobs, schedulerhost.Job{Name: j.Name, Schedule: j.Schedule, Timeout: j.Timeout, Overlap: j.Overlap,
			Misfire: j.Misfire, MisfireGrace: j.MisfireGrace, MaxCatchUp: j.MaxCatchUp, Retries: j.Retries, Jitter: j.Jitter,
			Deadline: j.Deadline, Run: func(context.Context) error { return nil }})
	}
	h, err := schedulerhost.New(schedulerhost.Config{Jobs: jobs, Ledger: o.Ledger, Control: o.Control, Instance: "e2e-audit", Logger: quiet})
	if err != nil {
		o.Close()
		sc.t.Fatalf("audit: %v", err)
	}
	sc.t.Cleanup(o.Close)
	return &auditor{mode: mode, host: h}
}

// compare reads the accounting of the window the checker judged, after
// from through to, and compares it tick by tick with the checker's
// verdicts (sc.check sets them). The ticks within schedulerhost.AuditLag
// of to are not compared: the accounting may hold them pending. It
// returns the summary's lines.
func (a *auditor) compare(sc *scenario, from, to time.Time) string {
	if a == nil {
		return ""
	}
	if sc.outcome == nil {
		return ""
	}
	var reps []audit.Report
	var err error
	// The backend may still be waking from the last fault: a few tries.
	waitFor(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		reps, err = a.host.Audit(ctx, "", from, to)
		return err == nil
	})
	if err != nil {
		sc.problem("audit: read the accounting: %v", err)
		return ""
	}
	res := auditcmp.Compare(sc.outcome.Report.Ticks, reps, sc.checkedJobs, to.Add(-schedulerhost.AuditLag))
	// The reports and every disagreement, beside history.json.
	if b, err := json.MarshalIndent(struct {
		Reports       []audit.Report
		Disagreements []string
	}{reps, res.Disagreements}, "", " "); err == nil {
		if err := os.WriteFile(filepath.Join(sc.dir, "audit.json"), b, 0o644); err != nil {
			sc.t.Errorf("%s: audit.json: %v", sc.label(), err)
		}
	}
	sum := res.Summary(sc.label(), 20)
	sc.t.Logf("%s", sum)
	if a.mode == "1" && !res.OK() {
		sc.t.Errorf("%s: the tick accounting disagrees with the checker on %d ticks (%s=report prints them without failing):\n%s",
			sc.label(), len(res.Disagreements), auditEnv, strings.Join(res.Disagreements, "\n"))
	}
	return sum + fmt.Sprintf("    (accounting read on %s with %s=%s)\n", sc.be.name, auditEnv, a.mode)
}
