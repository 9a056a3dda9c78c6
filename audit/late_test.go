package audit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
)

// A late note's ticks take the place of ticks recorded as missed, and of
// nothing that ran, was covered or refused; Add alone would keep the miss.
func TestAddLateOverMissedOnly(t *testing.T) {
	next := every(time.Second)
	base := func() *Account {
		a := &Account{Job: "j"}
		a.Add(span(next, Missed, ReasonNoLeader, sec(1), sec(10)), next)
		a.Add(span(next, Ran, ReasonOK, sec(11), sec(12)), next)
		a.Add(span(next, Covered, ReasonCatchUp, sec(13), sec(13)), next)
		a.Add(span(next, Refused, ReasonDenied, sec(14), sec(14)), next)
		return a
	}
	late := span(next, Skipped, ReasonOverlap, sec(3), sec(14))

	plain := base()
	if plain.Add(late, next) {
		t.Errorf("Add of the late skips changed the account: %s", describe(plain))
	}

	a := base()
	if !a.AddLate(late, next) {
		t.Fatalf("AddLate changed nothing: %s", describe(a))
	}
	checkRanges(t, a, next)
	byClass := map[Class]int64{}
	for _, r := range a.Ranges {
		byClass[r.Class] += r.Count
	}
	want := map[Class]int64{Missed: 2, Skipped: 8, Ran: 2, Covered: 1, Refused: 1}
	for c, n := range want {
		if byClass[c] != n {
			t.Errorf("%s: %d ticks, want %d: %s", c, byClass[c], n, describe(a))
		}
	}
	if a.AddLate(late, next) {
		t.Errorf("a second AddLate of the same note changed the account: %s", describe(a))
	}
}

// SaveLate writes a term's note unfenced, even once a later term raised
// the fence; LoadAll returns it beside the job's Account, LoadLate alone,
// and DeleteLate removes it at the version read.
func TestLateNotesStore(t *testing.T) {
	ctx := context.Background()
	m := memory.New(election.Timing{})
	s := m.Control()
	if err := s.Fence(ctx, 9); err != nil {
		t.Fatal(err)
	}
	next := every(time.Second)
	if _, err := Save(ctx, s, Stored{Account: Account{Job: "j", Specs: []Spec{{At: t0, Schedule: "@every 1s"}}}}, 0); err != nil {
		t.Fatal(err)
	}
	note := Account{Job: "j", Ranges: []Range{span(next, Skipped, ReasonOverlap, sec(2), sec(3))}}
	if _, err := Save(ctx, s, Stored{Account: Account{Job: "k"}}, 7); err == nil {
		t.Fatalf("a fenced write of term 7 after the fence of 9 landed")
	}
	if err := SaveLate(ctx, s, note, 7); err != nil {
		t.Fatalf("SaveLate of term 7: %v", err)
	}
	if err := SaveLate(ctx, s, Account{Job: "other", Ranges: note.Ranges}, 8); err != nil {
		t.Fatal(err)
	}
	all, err := LoadAll(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || len(all["j"].Late) != 1 || all["j"].Late[0].Token != 7 || all["j"].Version == 0 ||
		len(all["j"].Ranges) != 0 || len(all["other"].Late) != 1 || all["other"].Version != 0 {
		t.Fatalf("LoadAll = %+v, want j's account with its note of term 7 apart, and other's note alone", all)
	}
	st, err := Load(ctx, s, "j")
	ls := st.Late
	if err != nil || len(ls) != 1 || st.Version == 0 || ls[0].Key != LateKey("j", 7) || ls[0].Ranges[0].Count != 2 {
		t.Fatalf("Load(j) = %+v, %v, want its account and its note", st, err)
	}
	stale := ls[0]
	stale.Version++
	if err := DeleteLate(ctx, s, stale); !errors.Is(err, control.ErrVersionMismatch) {
		t.Errorf("DeleteLate at another version: %v, want a version mismatch", err)
	}
	if err := DeleteLate(ctx, s, ls[0]); err != nil {
		t.Fatal(err)
	}
	if st, _ := Load(ctx, s, "j"); len(st.Late) != 0 {
		t.Errorf("after DeleteLate: %+v", st.Late)
	}
}
