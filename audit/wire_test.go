package audit

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// flapping is an account of a job every second that alternates n times
// between a minute of ok runs and a failed tick, with an error of
// errLen bytes: 2n ranges.
func flapping(n, errLen int) (Account, Next) {
	next := every(time.Second)
	a := Account{Job: "billing-export", Specs: []Spec{{At: t0, Schedule: "@every 1s", Zone: "Europe/Paris"}}}
	k := 0
	for i := range n {
		okr := span(next, Ran, ReasonOK, sec(k), sec(k+59))
		okr.Token, okr.Instance, okr.Late = uint64(1000+i), "baton-2.baton.jobs.svc", 180*time.Millisecond
		a.Add(okr, next)
		bad := Range{Class: Ran, Reason: ReasonFailed, First: sec(k + 60), Last: sec(k + 60), Count: 1, Token: uint64(1000 + i),
			Instance: "baton-2.baton.jobs.svc", Attempts: 3, Late: 2500 * time.Millisecond, Error: strings.Repeat("x", errLen)}
		a.Add(bad, next)
		k += 61
	}
	return a, next
}

func encodedLen(t *testing.T, a Account) int {
	t.Helper()
	b, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestFitBound states what an Account holds within MaxBytes.
func TestFitBound(t *testing.T) {
	for _, c := range []struct {
		errLen   int
		minFit   int // ranges that must fit
		maxBytes int // bytes a range may take
	}{
		{0, 60, 135},        // measured: 133 bytes, 60 ranges
		{MaxError, 36, 220}, // every other range with an error: 216 bytes, 36 ranges
	} {
		a10, _ := flapping(5, c.errLen)
		a20, _ := flapping(10, c.errLen)
		per := (encodedLen(t, a20) - encodedLen(t, a10)) / 10
		a, _ := flapping(50, c.errLen)
		b, err := a.Fit()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ranges with %d-byte errors: %d bytes each; %d fit in %d bytes (%d used)", c.errLen, per, len(a.Ranges), MaxBytes, len(b))
		if per > c.maxBytes || len(a.Ranges) < c.minFit {
			t.Errorf("ranges with %d-byte errors take %d bytes each and %d fit, want at most %d bytes and at least %d ranges",
				c.errLen, per, len(a.Ranges), c.maxBytes, c.minFit)
		}
	}
}

func TestFitFoldsTheOldest(t *testing.T) {
	a, next := flapping(50, MaxError)
	var total int64
	newest := a.Ranges[len(a.Ranges)-1]
	for _, r := range a.Ranges {
		total += r.Count
	}
	b, err := a.Fit()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxBytes {
		t.Fatalf("Fit returned %d bytes, more than %d", len(b), MaxBytes)
	}
	if again, _ := a.Encode(); string(again) != string(b) {
		t.Error("Fit's bytes are not the fitted account's encoding")
	}
	var kept, folded int64
	for _, r := range a.Ranges {
		kept += r.Count
	}
	for _, n := range a.Folded {
		folded += n
	}
	if kept+folded != total {
		t.Errorf("after Fit: %d ticks in ranges + %d folded = %d, want the %d added", kept, folded, kept+folded, total)
	}
	if a.Folded[Ran] != folded || folded == 0 {
		t.Errorf("Folded = %v, want all %d folded ticks under ran", a.Folded, folded)
	}
	if got := next(a.FoldedThrough); !got.Equal(a.Ranges[0].First) {
		t.Errorf("FoldedThrough %s: the tick after it is %s, want the first range's first tick %s", rel(a.FoldedThrough), rel(got), rel(a.Ranges[0].First))
	}
	if last := a.Ranges[len(a.Ranges)-1]; !reflect.DeepEqual(last, newest) {
		t.Errorf("newest range after Fit %+v, want %+v", last, newest)
	}
	checkRanges(t, &a, next)
	// A fitted account stays so: Fit again changes nothing.
	n := len(a.Ranges)
	if _, err := a.Fit(); err != nil || len(a.Ranges) != n {
		t.Errorf("second Fit: %d ranges, %v; want %d", len(a.Ranges), err, n)
	}
	big := Account{Job: strings.Repeat("j", MaxBytes)}
	if _, err := big.Fit(); err == nil || !strings.Contains(err.Error(), "without ranges") {
		t.Errorf("Fit of an account too big without ranges: %v, want an error saying so", err)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 10, 25, 2, 30, 0, 123456789, paris) // in the DST fold
	a := Account{
		Job:           "report/daily é",
		Specs:         []Spec{{At: at, Schedule: "0 2 * * *", Zone: "Europe/Paris"}, {At: at.Add(time.Hour), Schedule: "@every 1h"}},
		Folded:        map[Class]int64{Ran: 7, Missed: 2},
		FoldedThrough: at.Add(-time.Hour),
		Ranges: []Range{
			{Class: Ran, Reason: ReasonOK, First: at, Last: at.Add(2 * time.Hour), Count: 3, Token: 1 << 60, Instance: "a:1", Attempts: 2, Late: 1500 * time.Microsecond},
			{Class: Covered, Reason: ReasonCatchUp, First: at.Add(3 * time.Hour), Last: at.Add(3 * time.Hour), Count: 1, By: at.Add(4 * time.Hour)},
			{Class: Missed, Reason: ReasonNoLeader, First: at.Add(5 * time.Hour), Last: at.Add(5 * time.Hour), Count: 1,
				NobodyFrom: at.Add(4*time.Hour + time.Second), NobodyUntil: at.Add(6 * time.Hour), Error: `quote " and <tag> & \ back`},
		},
	}
	b, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := a
	want.FoldedThrough = a.FoldedThrough.UTC()
	want.Specs = []Spec{{At: at.UTC(), Schedule: "0 2 * * *", Zone: "Europe/Paris"}, {At: at.Add(time.Hour).UTC(), Schedule: "@every 1h"}}
	want.Ranges = nil
	for _, r := range a.Ranges {
		for _, p := range []*time.Time{&r.First, &r.Last, &r.By, &r.NobodyFrom, &r.NobodyUntil} {
			if !p.IsZero() {
				*p = p.UTC()
			}
		}
		want.Ranges = append(want.Ranges, r)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode(Encode(a)):\n got %+v\nwant %+v", got, want)
	}
	if _, err := Decode([]byte("{not json")); err == nil || !strings.Contains(err.Error(), "audit: decode") {
		t.Errorf("Decode of bad bytes: %v, want an error naming the decode", err)
	}
	empty, err := Decode([]byte(`{"j":"x"}`))
	if err != nil || empty.Job != "x" || empty.Ranges != nil || !empty.FoldedThrough.IsZero() {
		t.Errorf("Decode of an empty account = %+v, %v", empty, err)
	}
}
