package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	batonhq "github.com/batonhq/baton"
	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi"
)

// `baton audit` through a node that does not run (any instance answers):
// a line of counts per job, then the ranges not ok; --job, --window and
// --json; a bad window or an unknown job is refused by name.
func TestAudit_Command(t *testing.T) {
	mem := memory.New(election.Timing{})
	nop := func(context.Context) error { return nil }
	b, err := batonhq.New(batonhq.Config{Backend: mem.Candidate(), Election: "e", Instance: "a", Logger: slog.New(slog.DiscardHandler),
		Jobs:     []batonhq.Job{{Name: "backup", Schedule: "@hourly", Run: nop}, {Name: "yearly", Schedule: "0 0 0 1 1 *", Run: nop}},
		Advanced: batonhq.Advanced{Ledger: mem.Ledger(), Control: mem.Control()}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	hour := time.Now().UTC().Truncate(time.Hour)
	ok := audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, Token: 9, Instance: "a"}
	old, lost, recent := ok, ok, ok
	old.First, old.Last, old.Count = hour.Add(-48*time.Hour), hour.Add(-4*time.Hour), 45
	lost.Class, lost.Reason, lost.First, lost.Last, lost.Count, lost.Error =
		audit.Lost, audit.ReasonRetryCut, hour.Add(-3*time.Hour), hour.Add(-3*time.Hour), 1, "HTTP 503 (not retried: term over)"
	recent.First, recent.Last, recent.Count = hour.Add(-2*time.Hour), hour.Add(time.Hour), 4
	st := audit.Stored{Account: audit.Account{Job: "backup", Specs: []audit.Spec{{At: hour.Add(-49 * time.Hour), Schedule: "@hourly", Zone: "UTC"}},
		Ranges: []audit.Range{old, lost, recent}}}
	if _, err := audit.Save(context.Background(), mem.Control(), st, 0); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := runAudit(context.Background(), append(args, "--node", srv.URL), &out, io.Discard)
		return out.String(), err
	}

	out, err := run()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("baton audit:\n%s", out)
	want := []string{
		"backup  due 24  ran 23  covered 0  skipped 0  missed 0  refused 0  lost 1  pending 0",
		"JOB     CLASS/REASON    FIRST",
		"backup  lost/retry-cut  " + hour.Add(-3*time.Hour).Format(time.RFC3339) + "  " + hour.Add(-3*time.Hour).Format(time.RFC3339) +
			"  1      9      a         HTTP 503 (not retried: term over)",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("baton audit: no line with %q:\n%s", w, out)
		}
	}
	if !strings.Contains(out, "yearly  due 0") {
		t.Errorf("baton audit: no line for yearly:\n%s", out)
	}
	out, err = run("--job", "backup", "--window", "2h", "--json")
	var rep httpapi.AuditReply
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Reports) != 1 || rep.Reports[0].Due != 2 {
		t.Errorf("baton audit --job backup --window 2h --json: %v\n%s", err, out)
	}
	if _, err := run("--window", "-1h"); err == nil || !strings.Contains(err.Error(), "--window -1h0m0s") {
		t.Errorf("--window -1h: %v, want it refused by name", err)
	}
	if _, err := run("--job", "nope"); err == nil || !strings.Contains(err.Error(), `HTTP 400: job "nope": not in this node's job set`) {
		t.Errorf("--job nope: %v, want the node's 400 naming the job", err)
	}
}
