package schedulerhost_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

func auditOf(t *testing.T, h *schedulerhost.Host, job string, from, to time.Time) audit.Report {
	t.Helper()
	reps, err := h.Audit(t.Context(), job, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Job != "tick" {
		t.Fatalf("Audit(%q) = %+v, want the report of tick", job, reps)
	}
	return reps[0]
}

// TestAudit_FollowerReadsTheLeadersHistory: a follower that never led
// accounts for a leader's ticks from the ledger history (no Account is
// written yet), and, once nobody leads, for the ticks nobody ran:
// missed for no leader, the newest pending for AuditLag.
func TestAudit_FollowerReadsTheLeadersHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 5 * time.Second})
		t0 := time.Now() // a whole multiple of 10 s since the epoch
		var mu sync.Mutex
		calls := 0
		job := schedulerhost.Job{Name: "tick", Schedule: "@every 10s", Run: func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			if calls++; calls == 3 {
				return errors.New("third run broken")
			}
			return nil
		}}
		f := follower(t, m, job)
		n := startNode(t, m, "leader", schedulerhost.Config{Jobs: []schedulerhost.Job{job}, Control: m.Control()})
		time.Sleep(65 * time.Second)
		synctest.Wait()
		rep := auditOf(t, f, "tick", t0, time.Now())
		if rep.Due != 6 || !reflect.DeepEqual(rep.Classes, map[audit.Class]int64{audit.Ran: 6}) {
			t.Errorf("after 65 s led: due %d, classes %v; want 6 ran", rep.Due, rep.Classes)
		}
		if len(rep.NotOK) != 1 || rep.NotOK[0].Reason != audit.ReasonFailed || !rep.NotOK[0].First.Equal(t0.Add(30*time.Second)) ||
			rep.NotOK[0].Instance != "leader" || !strings.Contains(rep.NotOK[0].Error, "third run broken") {
			t.Errorf("NotOK = %+v, want the failed tick at +30s, run by leader", rep.NotOK)
		}
		if !rep.LastOK.Equal(t0.Add(60 * time.Second)) {
			t.Errorf("LastOK = %v, want +60s", rep.LastOK.Sub(t0))
		}
		if len(rep.Specs) != 1 || rep.Specs[0].New != "@every 10s" || !rep.Specs[0].At.Equal(t0) {
			t.Errorf("Specs = %+v, want @every 10s from the follower's start", rep.Specs)
		}

		n.stop(t)
		stopped := time.Now()
		time.Sleep(60 * time.Second) // +125s: ticks +70..+120 nobody ran
		rep = auditOf(t, f, "", t0, time.Now())
		want := map[audit.Class]int64{audit.Ran: 6, audit.Missed: 4, audit.Pending: 2}
		if rep.Due != 12 || !reflect.DeepEqual(rep.Classes, want) {
			t.Errorf("60 s after the leader stopped: due %d, classes %v; want 12, %v", rep.Due, rep.Classes, want)
		}
		if k := len(rep.NotOK); k != 3 {
			t.Fatalf("NotOK = %+v, want failed, missed and pending ranges", rep.NotOK)
		}
		miss, pend := rep.NotOK[1], rep.NotOK[2]
		if miss.Reason != audit.ReasonNoLeader || miss.Count != 4 || !miss.First.Equal(t0.Add(70*time.Second)) ||
			miss.NobodyFrom.Before(t0.Add(60*time.Second)) || miss.NobodyFrom.After(stopped) || !miss.NobodyUntil.IsZero() {
			t.Errorf("missed range %+v, want ticks +70..+100, no leader from the term's end (%v) on", miss, stopped.Sub(t0))
		}
		if pend.Reason != audit.ReasonNotWritten || pend.Count != 2 || !pend.First.Equal(t0.Add(110*time.Second)) {
			t.Errorf("pending range %+v, want ticks +110 and +120 (within AuditLag %v)", pend, schedulerhost.AuditLag)
		}
	})
}

// TestAudit_ReadsTheStoredAccount: what a leader wrote in the control
// store is read, with its schedule, by one job or all.
func TestAudit_ReadsTheStoredAccount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 5 * time.Second})
		now := time.Now()
		job := schedulerhost.Job{Name: "tick", Schedule: "@every 10s", Run: func(context.Context) error { return nil }}
		other := schedulerhost.Job{Name: "other", Schedule: "@every 1h", Run: func(context.Context) error { return nil }}
		f := follower(t, m, job, other)
		a := audit.Account{Job: "tick"}
		a.SetSpec(audit.Spec{At: now.Add(-time.Hour), Schedule: "@every 20s", Zone: "UTC"})
		a.SetSpec(audit.Spec{At: now.Add(-30 * time.Minute), Schedule: "@every 10s", Zone: "UTC"})
		every := func(p time.Duration) audit.Next { return func(t time.Time) time.Time { return t.Truncate(p).Add(p) } }
		a.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, First: now.Add(-time.Hour + 20*time.Second),
			Last: now.Add(-30*time.Minute - 20*time.Second), Count: 89, Token: 1, Instance: "old"}, every(20*time.Second))
		a.Add(audit.Range{Class: audit.Skipped, Reason: audit.ReasonPaused, First: now.Add(-30 * time.Minute),
			Last: now, Count: 181, Token: 2, Instance: "old", Error: "paused by alice"}, every(10*time.Second))
		if _, err := audit.Save(t.Context(), m.Control(), audit.Stored{Account: a}, 0); err != nil {
			t.Fatal(err)
		}
		reps, err := f.Audit(t.Context(), "", now.Add(-time.Hour), now)
		if err != nil || len(reps) != 2 {
			t.Fatalf("Audit of all = %d reports, %v; want 2", len(reps), err)
		}
		one := auditOf(t, f, "tick", now.Add(-time.Hour), now)
		for _, rep := range reps {
			if rep.Job == "tick" && !reflect.DeepEqual(rep, one) {
				t.Errorf("the report of tick differs read alone and with all:\n%+v\n%+v", one, rep)
			}
		}
		want := map[audit.Class]int64{audit.Ran: 89, audit.Skipped: 181}
		if one.Due != 270 || !reflect.DeepEqual(one.Classes, want) || len(one.Specs) != 2 || one.Specs[1].Old != "@every 20s" {
			t.Errorf("report: due %d, classes %v, specs %+v; want 270, %v, the change from @every 20s", one.Due, one.Classes, one.Specs, want)
		}
		if _, err := f.Audit(t.Context(), "nope", now.Add(-time.Hour), now); err == nil || !strings.Contains(err.Error(), `"nope"`) {
			t.Errorf("Audit of an unknown job: %v, want an error naming it", err)
		}
	})
}

func TestAudit_NeedsAControlStore(t *testing.T) {
	m := memory.New(election.Timing{})
	h, err := schedulerhost.New(schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "tick", Schedule: "@every 10s",
		Run: func(context.Context) error { return nil }}}, Ledger: m.Ledger(), Instance: "x", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Audit(t.Context(), "", time.Now().Add(-time.Hour), time.Now()); !errors.Is(err, schedulerhost.ErrNoAccounting) {
		t.Errorf("Audit without a control store: %v, want ErrNoAccounting", err)
	}
}

// An account that does not decode spoils its own job's report only: the
// other jobs are reported, and its report says why it is partial.
func TestAudit_UnreadableAccountSpoilsItsJobOnly(t *testing.T) {
	m := memory.New(election.Timing{TTL: 5 * time.Second})
	run := func(context.Context) error { return nil }
	f := follower(t, m, schedulerhost.Job{Name: "a", Schedule: "@every 10s", Run: run}, schedulerhost.Job{Name: "b", Schedule: "@every 10s", Run: run})
	if _, err := m.Control().Put(t.Context(), control.Put{Key: audit.Key("a"), Value: []byte("{not json"), IfVersion: control.AnyVersion}); err != nil {
		t.Fatal(err)
	}
	reps, err := f.Audit(t.Context(), "", time.Now().Add(-time.Minute), time.Now())
	if err != nil {
		t.Fatalf("Audit of every job: %v, want the reports", err)
	}
	if len(reps) != 2 || !strings.Contains(reps[0].Error, "does not decode") || reps[1].Error != "" {
		t.Errorf("reports %+v, want a's saying its account does not decode, and b's clean", reps)
	}
	if _, err := f.Audit(t.Context(), "a", time.Now().Add(-time.Minute), time.Now()); err == nil {
		t.Error("Audit of a alone: no error, want its account's")
	}
}
