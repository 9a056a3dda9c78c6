package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
)

// testRunNowLeftByADeposedTerm: a term took two run-now requests and
// recorded the start of one, then ended. The next leader, a Host, runs
// the one whose run never started, once, under its own token, and
// settles the started one as cancelled without running it (its run may
// have happened: at most once).
func testRunNowLeftByADeposedTerm(t *testing.T, h JobControlHarness) {
	mk := h.NewElection(t, controlTiming)
	old, c := mk(t, "old"), mk(t, "a")
	jobs := control.NewJobs(old.Control)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := old.Backend.Acquire(ctx, election.Identity{ID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	tok := l.Token()
	if err := jobs.Fence(ctx, tok); err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	for _, id := range []string{"not-started", "started"} {
		r, _, err := jobs.RequestRun(ctx, control.RunRequest{ID: id, Job: "manual", By: "test", At: asked})
		if err != nil {
			t.Fatal(err)
		}
		if r, err = jobs.Take(ctx, r, tok, "old"); err != nil {
			t.Fatalf("take of %s by token %d: %v", id, tok, err)
		}
		if id == "started" {
			if _, err := jobs.Start(ctx, r, tok, time.Now()); err != nil {
				t.Fatalf("start of %s by token %d: %v", id, tok, err)
			}
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	var rec manualRuns
	e, _ := startControlNode(t, c, c.Control, rec.job("manual"))
	ti, _ := e.Term()
	final := map[string]control.RunRequest{}
	deadline := time.Now().Add(20 * time.Second)
	for len(final) < 2 && time.Now().Before(deadline) {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		rs, err := control.NewJobs(c.Control).Requests(rctx)
		rcancel()
		for _, r := range rs {
			if err == nil && r.State == control.StateDone {
				final[r.ID] = r
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(5 * 200 * time.Millisecond) // five more polls: no second run
	ns, st := final["not-started"], final["started"]
	if runs := rec.of("not-started"); ns.Result != "ok" || ns.Token != ti.Token || len(runs) != 1 || runs[0] != ti.Token {
		t.Errorf("not-started, taken by token %d and never started: %s %q by token %d (%s), run by tokens %v; want done ok, run once by the next term (token %d)",
			tok, ns.State, ns.Result, ns.Token, ns.Error, runs, ti.Token)
	}
	if runs := rec.of("started"); st.Result != "cancelled" || len(runs) != 0 {
		t.Errorf("started, whose start token %d recorded: %s %q (%s), run by tokens %v; want done cancelled, not run", tok, st.State, st.Result, st.Error, runs)
	}
	t.Logf("left taken by token %d: not-started %s by token %d; started %s (%s)", tok, ns.Result, ns.Token, st.Result, st.Error)
}
