package baton_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// Audit refuses a negative window naming it, a job not in the set naming
// it, and says ErrNoAccounting without a control store.
func TestAudit_Errors(t *testing.T) {
	mem := memory.New(election.Timing{})
	newBaton := func(adv baton.Advanced) *baton.Baton {
		b, err := baton.New(baton.Config{Backend: mem.Candidate(), Election: "e", Instance: "a", Logger: slog.New(slog.DiscardHandler),
			Jobs:     []baton.Job{{Name: "report", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}},
			Advanced: adv})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctx := context.Background()
	b := newBaton(baton.Advanced{Ledger: mem.Ledger(), Control: mem.Control()})
	if _, err := b.Audit(ctx, "", -1); err == nil || !strings.Contains(err.Error(), "window -1ns") {
		t.Errorf("window -1ns: %v, want it refused by name", err)
	}
	if _, err := b.Audit(ctx, "nope", 0); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("job nope: %v, want it named", err)
	}
	reps, err := b.Audit(ctx, "", 0)
	if err != nil || len(reps) != 1 || reps[0].Job != "report" {
		t.Errorf("Audit: %v, %+v, want one report of report", err, reps)
	}
	if _, err := newBaton(baton.Advanced{Ledger: mem.Ledger()}).Audit(ctx, "", 0); !errors.Is(err, schedulerhost.ErrNoAccounting) {
		t.Errorf("no control store: %v, want ErrNoAccounting", err)
	}
}

// Advanced.NoAccounting: the leader writes no tick account; by default
// it does.
func TestAdvanced_NoAccounting(t *testing.T) {
	for _, off := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var store control.Store
			p := startPair(t, baton.Job{Name: "sync", Schedule: "@every 1s", Run: func(context.Context) error { return nil }},
				func(_ string, adv *baton.Advanced) { adv.NoAccounting, store = off, adv.Control })
			time.Sleep(12 * time.Second)
			p.stop(t)
			es, err := store.List(context.Background(), audit.Prefix)
			if err != nil {
				t.Fatal(err)
			}
			if (len(es) == 0) != off {
				t.Errorf("NoAccounting %v: %d accounts written", off, len(es))
			}
		})
	}
}
