package e2e

import (
	"fmt"
	"testing"
	"time"
)

// The leader forgets a done run-now request once kept newer ones are
// done. The operator may not have heard of every one it made: a fault
// can lose the answer to a request that the leader accepted. Here the
// operator heard of 45 requests after r0, and the job's records show 50
// run after it: r0 may be forgotten. Judged by the operator's list alone
// (before this rule), a 404 for r0 was a problem ("still \"\" 20 s after
// the faults ended").
func TestForgettable_CountsRequestsWhoseAnswerWasLost(t *testing.T) {
	const kept = 50
	t0 := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	runs := map[string][]time.Time{}
	var reqs []runNow
	for i := range 51 {
		id := fmt.Sprintf("r%d", i)
		runs[id] = []time.Time{t0.Add(time.Duration(i) * 5 * time.Second)}
		if i%10 != 9 { // every tenth answer lost: 46 heard of, r0 included
			reqs = append(reqs, runNow{id: id})
		}
	}
	if i := len(reqs) - kept; i > 0 {
		t.Fatalf("the operator heard of %d requests: r0 is old by its list alone", len(reqs))
	}
	if !forgettable(reqs, 0, runs, kept) {
		t.Errorf("r0, with 50 requests run after it: not forgettable, want forgettable")
	}
	if forgettable(reqs, 1, runs, kept) {
		t.Errorf("r1, with 49 run after it and 44 heard of: forgettable, want not")
	}

	// A request run again after the others (twice) is not old by its
	// first run.
	runs["r0"] = append(runs["r0"], t0.Add(300*time.Second))
	if forgettable(reqs, 0, runs, kept) {
		t.Errorf("r0 run again after all the others: forgettable, want not")
	}
	// With no run of it in the records, only the operator's list counts.
	delete(runs, "r0")
	if forgettable(reqs, 0, runs, kept) {
		t.Errorf("r0 with no run: forgettable, want not")
	}
}
