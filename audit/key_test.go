package audit

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
)

// listCounter counts the entries its List returns.
type listCounter struct {
	control.Store
	entries int
}

func (s *listCounter) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	es, err := s.Store.List(ctx, prefix)
	s.entries += len(es)
	return es, err
}

// Load of one job reads its entry alone: job-7's key is no prefix of
// job-70's, job-700's or job-7x's.
func TestLoad_ReadsTheJobsEntryAlone(t *testing.T) {
	s := &listCounter{Store: memory.New(election.Timing{}).Control()}
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, job := range []string{"job-7", "job-70", "job-700", "job-7x", "job-6"} {
		a := Stored{Account: Account{Job: job, Specs: []Spec{{At: t0, Schedule: "@every 1m", Zone: "UTC"}}}}
		if _, err := Save(t.Context(), s, a, 0); err != nil {
			t.Fatal(err)
		}
	}
	st, err := Load(t.Context(), s, "job-7")
	if err != nil || st.Job != "job-7" || st.Version == 0 {
		t.Fatalf("Load(job-7) = %+v, %v", st, err)
	}
	if s.entries != 1 {
		t.Errorf("Load(job-7) read %d entries, want 1", s.entries)
	}
	all, err := LoadAll(t.Context(), s)
	if err != nil || len(all) != 5 {
		t.Errorf("LoadAll: %d accounts, %v; want 5", len(all), err)
	}
}
