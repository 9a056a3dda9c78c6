package schedulerhost_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/schedulerhost"
)

// TestHost_Lead_RecordsTheTerm: with a Control store, Lead records each
// term in it, its token and instance as it begins, then its end and how
// it ended: stepped down (with the hold's reason when the Elector was
// held), lost, shut down.
func TestHost_Lead_RecordsTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		yearly := schedulerhost.Job{Name: "report", Schedule: "0 0 0 1 1 *", Run: func(context.Context) error { return nil }}
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{yearly}})
		terms := func() []control.Term {
			t.Helper()
			synctest.Wait()
			ts, err := control.NewJobs(m.Control()).Terms(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return ts
		}
		token := func() uint64 {
			t.Helper()
			ti, ok := n.elector.Term()
			if !ok {
				t.Fatal("a does not lead")
			}
			return ti.Token
		}
		first := token()
		ts := terms()
		if len(ts) != 1 || ts[0].Token != first || ts[0].Instance != "a" || ts[0].Started.IsZero() || !ts[0].Ended.IsZero() || ts[0].How != "" {
			t.Fatalf("terms while leading = %+v, want a's open term %d", ts, first)
		}

		n.elector.StepDown(0)
		second := func() uint64 { synctest.Wait(); return token() }()
		n.elector.Hold("app unhealthy: test")
		n.elector.StepDown(0)
		synctest.Wait()
		n.elector.Hold("")
		third := func() uint64 { synctest.Wait(); return token() }()
		m.Revoke()
		fourth := func() uint64 { synctest.Wait(); return token() }()
		n.stop(t)

		want := map[uint64]string{first: "stepped down", second: "stepped down (app unhealthy: test)", third: "lost: ", fourth: "shut down"}
		ts = terms()
		if len(ts) != len(want) {
			t.Fatalf("terms = %+v, want %d", ts, len(want))
		}
		for _, tm := range ts {
			how, ok := want[tm.Token]
			if !ok || tm.Instance != "a" || tm.Ended.IsZero() || tm.Ended.Before(tm.Started) ||
				(how == "lost: " && !strings.HasPrefix(tm.How, how)) || (how != "lost: " && tm.How != how) {
				t.Errorf("term %+v, want a's, ended, how %q", tm, how)
			}
		}
	})
}
