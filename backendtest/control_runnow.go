package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// testTakeStartSettle: the records of a run-now request across two terms
// (control/runnow.go). Term 1 takes two requests and starts one; term 2
// leads and fences the store. Term 1's start of the other is refused;
// term 2 settles them: the take without a start is pending again (and
// term 2 takes it), the started one is done, cancelled. A put back made
// from a version read before term 2's writes changes nothing.
func testTakeStartSettle(t *testing.T, e ControlElection) {
	jobs := control.NewJobs(e.Store)
	at := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	request := func(id string) control.RunRequest {
		r, made, err := jobs.RequestRun(ctx(t), control.RunRequest{ID: id, Job: "report", By: "test", At: at})
		if err != nil || !made {
			t.Fatalf("RequestRun(%s) = %v, %v", id, made, err)
		}
		return r
	}
	must := func(what string) func(control.RunRequest, error) control.RunRequest {
		return func(r control.RunRequest, err error) control.RunRequest {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return r
		}
	}
	tok1 := e.Lead(t)
	if err := jobs.Fence(ctx(t), tok1); err != nil {
		t.Fatalf("Fence by term 1 (token %d): %v", tok1, err)
	}
	notStarted := request("not-started")
	started := request("started")
	notStarted = must("term 1's take")(jobs.Take(ctx(t), notStarted, tok1, "one"))
	if notStarted.Began() {
		t.Fatalf("a take without a start reads as started: %+v", notStarted)
	}
	started = must("term 1's take")(jobs.Take(ctx(t), started, tok1, "one"))
	started = must("term 1's start")(jobs.Start(ctx(t), started, tok1, at.Add(time.Second)))
	if !started.Began() {
		t.Fatalf("a started request reads as not started: %+v", started)
	}

	tok2 := e.Lead(t)
	if err := jobs.Fence(ctx(t), tok2); err != nil {
		t.Fatalf("Fence by term 2 (token %d): %v", tok2, err)
	}
	if _, err := jobs.Start(ctx(t), notStarted, tok1, at.Add(2*time.Second)); !errors.Is(err, ledger.ErrStaleTerm) {
		t.Fatalf("term 1's start after term 2 fenced the store: %v, want ErrStaleTerm", err)
	}
	rs, err := jobs.Requests(ctx(t))
	if err != nil || len(rs) != 2 {
		t.Fatalf("Requests = %+v, %v; want the two", rs, err)
	}
	for _, r := range rs {
		if r.State != control.StateTaken || r.Token != tok1 || r.Began() != (r.ID == "started") {
			t.Fatalf("term 2 reads %s as %s by token %d, began %v; want taken by %d, began only if started", r.ID, r.State, r.Token, r.Began(), tok1)
		}
	}
	back := must("term 2's settle of the take without a start")(jobs.Settle(ctx(t), notStarted, tok2, at.Add(3*time.Second)))
	if back.State != control.StatePending || back.Token != 0 || !back.Started.IsZero() {
		t.Fatalf("settled take without a start = %+v, want pending, no token, no start", back)
	}
	if _, err := jobs.PutBack(ctx(t), notStarted, 0); !errors.Is(err, control.ErrVersionMismatch) {
		t.Fatalf("term 1's late put back, from the version it took: %v, want ErrVersionMismatch", err)
	}
	done := must("term 2's settle of the started run")(jobs.Settle(ctx(t), started, tok2, at.Add(3*time.Second)))
	if done.State != control.StateDone || done.Result != ledger.ResultCancelled || done.Error == "" {
		t.Fatalf("settled started run = %+v, want done, cancelled, saying why", done)
	}
	if _, err := jobs.Take(ctx(t), back, tok1, "one"); !errors.Is(err, ledger.ErrStaleTerm) {
		t.Fatalf("term 1's take of the request pending again: %v, want ErrStaleTerm", err)
	}
	again := must("term 2's take")(jobs.Take(ctx(t), back, tok2, "two"))
	if again.State != control.StateTaken || again.Token != tok2 || again.Began() {
		t.Fatalf("term 2's take = %+v, want taken by %d, not started", again, tok2)
	}
}
