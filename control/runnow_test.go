package control_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
)

// Take, Start, PutBack and Settle refuse a request in the wrong state, or
// without a token, saying which request and what it is.
func TestRunNowStepsRefuseTheWrongState(t *testing.T) {
	j := control.NewJobs(memory.New(election.Timing{}).Control())
	pending := control.RunRequest{ID: "r1", Job: "report", State: control.StatePending, Version: 1}
	taken := pending
	taken.State, taken.Token = control.StateTaken, 3
	at := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		what string
		err  error
		want string
	}{
		{"take of a taken request", second(j.Take(t.Context(), taken, 4, "a")), "take of request r1: it is taken, not pending"},
		{"take without a token", second(j.Take(t.Context(), pending, 0, "a")), "take of request r1 without a token"},
		{"start by another token", second(j.Start(t.Context(), taken, 4, at)), "start of request r1 by token 4: it is taken by token 3"},
		{"start without a time", second(j.Start(t.Context(), taken, 3, time.Time{})), "start of request r1: no start time"},
		{"put back of a pending request", second(j.PutBack(t.Context(), pending, 0)), "put back of request r1: it is pending, not taken"},
		{"settle by the same term", second(j.Settle(t.Context(), taken, 3, at)), "settle of request r1 by token 3: it is taken by token 3"},
		{"fence without a token", j.Fence(t.Context(), 0), "fence without a token"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.what, tc.err, tc.want)
		}
	}
}

func second(_ control.RunRequest, err error) error { return err }
