package kube_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/schedulerhost"
)

// A leader whose claims the apiserver refuses (the Role without update on
// ConfigMaps) cannot write that in the ledger or the accounts: its lease's
// note says so, and every instance's Audit shows the ticks since the first
// refused one as refused (denied), with the apiserver's error, where they
// would otherwise be unaccounted.
func TestAudit_RefusedClaimsShowOnEveryInstance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	b, setRole := claimer(t, ctx)
	jobs := []schedulerhost.Job{{Name: "j", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}}
	newHost := func(inst string) *schedulerhost.Host {
		h, err := schedulerhost.New(schedulerhost.Config{Ledger: b.Ledger(), Control: b.Control(), Accounts: b.AccountStore(),
			Leader: b.Leader, Instance: inst, Logger: slog.New(slog.DiscardHandler), Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	leader, follower := newHost("pod-0"), newHost("pod-1")
	_, stop := lead(t, ctx, b, leader)
	defer stop()
	for len(leader.Status()) == 0 || leader.Status()[0].LastRun == nil {
		if ctx.Err() != nil {
			t.Fatal("no run before the Role was cut")
		}
		time.Sleep(100 * time.Millisecond)
	}
	setRole("get")
	cut := time.Now()
	for name, h := range map[string]*schedulerhost.Host{"leader": leader, "follower": follower} {
		var got audit.Range
		for got.Count == 0 {
			if ctx.Err() != nil {
				t.Fatalf("%s: no refused tick in its audit within the test's time", name)
			}
			time.Sleep(500 * time.Millisecond)
			reps, err := h.Audit(ctx, "j", cut.Add(-time.Minute), time.Now())
			if err != nil {
				continue // the apiserver may refuse a read while RBAC changes
			}
			for _, r := range reps[0].NotOK {
				if r.Class == audit.Refused && r.Reason == audit.ReasonDenied {
					got = r
				}
			}
		}
		if !strings.Contains(got.Error, "403") || got.Token == 0 || got.Instance != "pod-0" {
			t.Errorf("%s: refused range %+v, want the apiserver's 403, the leader's token and instance pod-0", name, got)
		}
		t.Logf("%s: %d ticks refused (%s .. %s): %.120s", name, got.Count, got.First.Format(time.TimeOnly), got.Last.Format(time.TimeOnly), got.Error)
	}
}
