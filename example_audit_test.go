package baton_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// Any instance, leading or not, running or not, accounts for the due
// ticks of its jobs from the backend: here the last 24 hours of an hourly
// job whose run two hours ago failed. The leader writes the Accounts as
// it runs the jobs; this one is written by hand.
func ExampleBaton_Audit() {
	mem := memory.New(election.Timing{})
	b, err := baton.New(baton.Config{
		Backend:  mem.Candidate(),
		Election: "reports",
		Instance: "a",
		Jobs:     []baton.Job{{Name: "backup", Schedule: "@hourly", Run: func(context.Context) error { return nil }}},
		Logger:   slog.New(slog.DiscardHandler),
		Advanced: baton.Advanced{Ledger: mem.Ledger(), Control: mem.Control()},
	})
	if err != nil {
		panic(err)
	}
	hour := time.Now().UTC().Truncate(time.Hour)
	ok := audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, Token: 7, Instance: "a"}
	old, failed, recent := ok, ok, ok
	old.First, old.Last, old.Count = hour.Add(-48*time.Hour), hour.Add(-3*time.Hour), 46
	failed.Reason, failed.First, failed.Last, failed.Count, failed.Error =
		audit.ReasonFailed, hour.Add(-2*time.Hour), hour.Add(-2*time.Hour), 1, "exit status 1"
	recent.First, recent.Last, recent.Count = hour.Add(-time.Hour), hour.Add(time.Hour), 3 // through the next tick
	acct := audit.Stored{Account: audit.Account{Job: "backup",
		Specs:  []audit.Spec{{At: hour.Add(-49 * time.Hour), Schedule: "@hourly", Zone: "UTC"}},
		Ranges: []audit.Range{old, failed, recent}}}
	if _, err := audit.Save(context.Background(), mem.Control(), acct, 0); err != nil {
		panic(err)
	}

	reports, err := b.Audit(context.Background(), "backup", 0) // 0: the last 24 h
	if err != nil {
		panic(err)
	}
	for _, r := range reports {
		fmt.Printf("%s: due %d, ran %d, missed %d\n", r.Job, r.Due, r.Classes[audit.Ran], r.Classes[audit.Missed])
		for _, n := range r.NotOK {
			fmt.Printf("not ok: %s/%s, %d tick, %q, token %d\n", n.Class, n.Reason, n.Count, n.Error, n.Token)
		}
	}
	// Output:
	// backup: due 24, ran 24, missed 0
	// not ok: ran/failed, 1 tick, "exit status 1", token 7
}
