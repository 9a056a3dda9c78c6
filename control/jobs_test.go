package control_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

func TestRequestRunIsIdempotent(t *testing.T) {
	m := memory.New(election.Timing{})
	j := control.NewJobs(m.Control())
	at := time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC)
	r1, made, err := j.RequestRun(t.Context(), control.RunRequest{ID: "req-1", Job: "report", By: "alice", At: at})
	if err != nil || !made || r1.State != control.StatePending {
		t.Fatalf("first RequestRun = %+v, %v, %v; want a pending request made", r1, made, err)
	}
	r2, made, err := j.RequestRun(t.Context(), control.RunRequest{ID: "req-1", Job: "report", By: "bob", At: at.Add(time.Second)})
	if err != nil || made || r2.By != "alice" || r2.Version != r1.Version {
		t.Fatalf("retried RequestRun = %+v, %v, %v; want the first request back", r2, made, err)
	}
	if _, _, err := j.RequestRun(t.Context(), control.RunRequest{ID: "req-1", Job: "other", By: "bob", At: at}); !errors.Is(err, control.ErrRequestConflict) {
		t.Fatalf("RequestRun of another job with the same id: %v, want ErrRequestConflict", err)
	}
	for _, id := range []string{"", "has space", "a/b", string(make([]byte, 129))} {
		if _, _, err := j.RequestRun(t.Context(), control.RunRequest{ID: id, Job: "report"}); err == nil {
			t.Errorf("RequestRun with id %.20q: no error", id)
		}
	}
	// Two leaders race to take it: one wins.
	taken := r1
	taken.State, taken.Token = control.StateTaken, 7
	if _, err := j.Update(t.Context(), taken, 0); err != nil {
		t.Fatalf("take: %v", err)
	}
	if _, err := j.Update(t.Context(), taken, 0); !errors.Is(err, control.ErrVersionMismatch) {
		t.Fatalf("second take from the same read: %v, want ErrVersionMismatch", err)
	}
	rs, err := j.Requests(t.Context())
	if err != nil || len(rs) != 1 || rs[0].State != control.StateTaken || rs[0].Run().Kind() != "manual" {
		t.Fatalf("Requests = %+v, %v; want the one request, taken, manual", rs, err)
	}
}

func TestPauseResume(t *testing.T) {
	m := memory.New(election.Timing{})
	j := control.NewJobs(m.Control())
	for _, job := range []string{"a/b c", "a"} {
		if err := j.Pause(t.Context(), control.Pause{Job: job, By: "alice", Note: "maintenance"}); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := j.Pauses(t.Context())
	if err != nil || len(ps) != 2 || ps["a/b c"].Note != "maintenance" {
		t.Fatalf("Pauses = %+v, %v", ps, err)
	}
	if p, err := j.Resume(t.Context(), "a"); err != nil || p.By != "alice" {
		t.Fatalf("Resume(a) = %+v, %v", p, err)
	}
	if _, err := j.Resume(t.Context(), "a"); !errors.Is(err, control.ErrNotPaused) {
		t.Fatalf("second Resume(a): %v, want ErrNotPaused", err)
	}
	if ps, _ := j.Pauses(t.Context()); len(ps) != 1 {
		t.Fatalf("Pauses after a resume = %+v, want a/b c only", ps)
	}
	if (ledger.Run{CatchUp: true}).Kind() != "catch-up" || (ledger.Run{}).Kind() != "scheduled" {
		t.Fatal("Run.Kind")
	}
}
