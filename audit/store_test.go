package audit

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

func TestLoadAbsentAccount(t *testing.T) {
	s := memory.New(election.Timing{}).Control()
	st, err := Load(t.Context(), s, "nightly")
	if err != nil || st.Version != 0 || st.Job != "nightly" || len(st.Ranges) != 0 || len(st.Specs) != 0 {
		t.Fatalf("Load of an absent account = %+v, %v; want an empty account of nightly at version 0", st, err)
	}
	all, err := LoadAll(t.Context(), s)
	if err != nil || len(all) != 0 {
		t.Fatalf("LoadAll of none = %v, %v", all, err)
	}
}

func TestSaveLoadVersions(t *testing.T) {
	ctx := t.Context()
	s := memory.New(election.Timing{}).Control()
	next := every(time.Second)
	st := Stored{Account: Account{Job: "a"}}
	st.SetSpec(Spec{At: t0, Schedule: "@every 1s"})
	st.Add(span(next, Ran, ReasonOK, sec(1), sec(100)), next)
	v1, err := Save(ctx, s, st, 0)
	if err != nil || v1 <= 0 {
		t.Fatalf("Save of a new account = %d, %v", v1, err)
	}
	got, err := Load(ctx, s, "a")
	if err != nil || got.Version != v1 || !reflect.DeepEqual(got.Account, st.Account) {
		t.Fatalf("Load = %+v, %v; want %+v at version %d", got, err, st.Account, v1)
	}
	// A writer that read it absent, or at an older version, is refused.
	if _, err := Save(ctx, s, st, 0); !errors.Is(err, control.ErrVersionMismatch) || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("Save at version 0 of a present account: %v, want ErrVersionMismatch naming the job", err)
	}
	got.Add(span(next, Ran, ReasonFailed, sec(101), sec(101)), next)
	v2, err := Save(ctx, s, got, 0)
	if err != nil || v2 <= v1 {
		t.Fatalf("Save at the version read = %d, %v; want a version after %d", v2, err, v1)
	}
	if _, err := Save(ctx, s, got, 0); !errors.Is(err, control.ErrVersionMismatch) {
		t.Errorf("second Save from the same read: %v, want ErrVersionMismatch", err)
	}
	// Load finds its job's key only, not one it prefixes.
	if _, err := Save(ctx, s, Stored{Account: Account{Job: "ab"}}, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(ctx, s, "a"); err != nil || got.Version != v2 || len(got.Ranges) != 2 {
		t.Errorf("Load(a) beside ab = %+v, %v; want a at version %d", got, err, v2)
	}
}

func TestSaveFencedByTerm(t *testing.T) {
	ctx := t.Context()
	m := memory.New(election.Timing{TTL: time.Minute})
	lease, err := m.Candidate().Acquire(ctx, election.Identity{ID: "leader"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lease.Release(context.Background()) })
	s := m.Control()
	st := Stored{Account: Account{Job: "a"}}
	v, err := Save(ctx, s, st, lease.Token())
	if err != nil {
		t.Fatalf("Save by the live term: %v", err)
	}
	if !m.RevokeToken(lease.Token()) {
		t.Fatal("the lease was not the live one")
	}
	st.Version = v
	if _, err := Save(ctx, s, st, lease.Token()); !errors.Is(err, ledger.ErrStaleTerm) {
		t.Errorf("Save by an ended term: %v, want ErrStaleTerm", err)
	}
}

func TestLoadAll(t *testing.T) {
	ctx := t.Context()
	s := memory.New(election.Timing{}).Control()
	for _, job := range []string{"team/report", "b c", "x"} {
		if _, err := Save(ctx, s, Stored{Account: Account{Job: job, Specs: []Spec{{At: t0, Schedule: "@every 1m"}}}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, control.Put{Key: Prefix + "broken", Value: []byte("{"), IfVersion: 0}); err != nil {
		t.Fatal(err)
	}
	all, err := LoadAll(ctx, s)
	if err == nil || !strings.Contains(err.Error(), Prefix+"broken") {
		t.Errorf("LoadAll with a broken entry: %v, want an error naming its key", err)
	}
	if len(all) != 3 || all["team/report"].Version == 0 || all["b c"].Specs[0].Schedule != "@every 1m" {
		t.Errorf("LoadAll = %+v, want the three good accounts by job", all)
	}
	if k := Key("team/report"); k != "audit/team%2Freport/" || control.CheckKey(Key("b c")) != nil {
		t.Errorf("Key(team/report) = %q, Key(b c) checks %v", k, control.CheckKey(Key("b c")))
	}
}

// Save fits the account it writes within MaxBytes, and leaves the
// caller's as it was: its ranges and its folded counts agree.
func TestSaveFitsAndLeavesTheCallersAccount(t *testing.T) {
	ctx := t.Context()
	s := memory.New(election.Timing{}).Control()
	a, _ := flapping(50, MaxError)
	a.Folded = map[Class]int64{Missed: 5}
	st := Stored{Account: a}
	n := len(st.Ranges)
	if _, err := Save(ctx, s, st, 0); err != nil {
		t.Fatalf("Save of %d ranges: %v", n, err)
	}
	if len(st.Ranges) != n || !reflect.DeepEqual(st.Folded, map[Class]int64{Missed: 5}) {
		t.Errorf("after Save the caller's account has %d ranges and folded %v, want %d and map[missed:5]", len(st.Ranges), st.Folded, n)
	}
	got, err := Load(ctx, s, a.Job)
	if err != nil {
		t.Fatal(err)
	}
	var total, stored int64
	for _, r := range a.Ranges {
		total += r.Count
	}
	for _, r := range got.Ranges {
		stored += r.Count
	}
	if got.Folded[Missed] != 5 || stored+got.Folded[Ran] != total || len(got.Ranges) >= n {
		t.Errorf("stored: %d ranges, %d ticks + folded %v; want fewer than %d ranges, %d ticks in all, missed 5", len(got.Ranges), stored, got.Folded, n, total)
	}
}
