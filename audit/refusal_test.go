package audit

import (
	"strings"
	"testing"
	"time"
)

func TestRefusal_NoteRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	r := Refusal{Token: 7, Instance: "pod-0", Since: at, First: at.Add(-time.Second), Count: 3, Error: strings.Repeat("é", MaxError)}
	got, ok := ParseNote(r.Note())
	if !ok {
		t.Fatalf("ParseNote(%q): not a refusal", r.Note())
	}
	if got.Token != 7 || got.Instance != "pod-0" || !got.Since.Equal(at) || !got.First.Equal(at.Add(-time.Second)) || got.Count != 3 {
		t.Errorf("round trip: %+v, want %+v", got, r)
	}
	if len(got.Error) > MaxError {
		t.Errorf("error of %d bytes, want at most %d", len(got.Error), MaxError)
	}
	for _, note := range []string{"", "refused", "refused {", "something else"} {
		if _, ok := ParseNote(note); ok {
			t.Errorf("ParseNote(%q) took it for a refusal", note)
		}
	}
}

// A tick nothing records, at or after a refusal's first refused tick, is
// refused (denied) with the refusal's error; one before it is missed.
func TestCompute_RefusalClassifiesTheTicksNothingRecords(t *testing.T) {
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	every := func(Spec) (Next, error) {
		return func(t time.Time) time.Time { return t.Truncate(time.Second).Add(time.Second) }, nil
	}
	a := Account{Job: "j", Specs: []Spec{{At: start, Schedule: "@every 1s", Zone: "UTC"}}}
	in := Input{Account: a, From: start, To: start.Add(100 * time.Second), Lag: 10 * time.Second, Schedules: every,
		Refusals: []Refusal{{Token: 4, Instance: "pod-0", First: start.Add(51 * time.Second), Error: "403 Forbidden"}}}
	rep, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Due != 100 {
		t.Fatalf("due %d, want 100", rep.Due)
	}
	var refused, unaccounted int64
	for _, c := range rep.Counts {
		switch {
		case c.Class == Refused && c.Reason == ReasonDenied:
			refused += c.Ticks
		case c.Class == Missed && c.Reason == ReasonUnaccounted:
			unaccounted += c.Ticks
		}
	}
	// Ticks 1..50 unaccounted, 51..90 refused, 91..100 pending (the lag).
	if refused != 40 || unaccounted != 50 || rep.Classes[Pending] != 10 {
		t.Errorf("refused %d, unaccounted %d, pending %d; want 40, 50, 10 (counts %+v)", refused, unaccounted, rep.Classes[Pending], rep.Counts)
	}
	for _, r := range rep.NotOK {
		if r.Class == Refused && (r.Token != 4 || r.Error != "403 Forbidden" || !r.First.Equal(start.Add(51*time.Second))) {
			t.Errorf("refused range %+v, want token 4, the error, from the first refused tick", r)
		}
	}
}
