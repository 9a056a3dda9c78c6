package audit

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func ok(k int, token uint64) Range {
	return Range{Class: Ran, Reason: ReasonOK, First: sec(k), Last: sec(k), Count: 1, Token: token, Instance: "a"}
}

func TestAddJoinsConsecutiveTicks(t *testing.T) {
	next := every(time.Second)
	var a Account
	for k := range 10 {
		if !a.Add(ok(k, 1), next) {
			t.Fatalf("Add(tick %d) = false, want a change", k)
		}
	}
	if got, want := describe(&a), "ran/ok 0-9 (10)"; got != want {
		t.Fatalf("after ticks 0..9: %s, want %s", got, want)
	}
	// Each field that makes a range: another term, instance, class,
	// reason or catch-up run starts a new one.
	other := []Range{ok(10, 2), ok(11, 2), ok(12, 2)}
	other[1].Instance = "b"
	other[2].Class, other[2].Reason = Lost, ReasonOutcomeUnknown
	for _, r := range other {
		a.Add(r, next)
	}
	cov := Range{Class: Covered, Reason: ReasonCatchUp, First: sec(13), Last: sec(14), Count: 2, By: sec(20)}
	cov2 := cov
	cov2.First, cov2.Last, cov2.Count, cov2.By = sec(15), sec(15), 1, sec(21)
	cov3 := cov2
	cov3.First, cov3.Last = sec(16), sec(16)
	a.Add(cov, next)
	a.Add(cov2, next)
	a.Add(cov3, next)
	want := "ran/ok 0-9 (10) ran/ok 10-10 (1) ran/ok 11-11 (1) lost/outcome-unknown 12-12 (1) covered/catch-up 13-14 (2) covered/catch-up 15-16 (2)"
	if got := describe(&a); got != want {
		t.Fatalf("ranges:\n got %s\nwant %s", got, want)
	}
	checkRanges(t, &a, next)
}

func TestAddJoinKeepsMostAttemptsAndLateness(t *testing.T) {
	next := every(time.Minute)
	var a Account
	r1 := Range{Class: Ran, Reason: ReasonFailed, First: t0, Last: t0, Count: 1, Token: 3, Attempts: 3, Late: 40 * time.Millisecond, Error: "boom 1"}
	r2 := r1
	r2.First, r2.Last, r2.Attempts, r2.Late, r2.Error = t0.Add(time.Minute), t0.Add(time.Minute), 2, 90*time.Millisecond, "boom 2"
	a.Add(r1, next)
	a.Add(r2, next)
	if len(a.Ranges) != 1 {
		t.Fatalf("ranges %s, want one", describe(&a))
	}
	r := a.Ranges[0]
	if r.Count != 2 || r.Attempts != 3 || r.Late != 90*time.Millisecond || r.Error != "boom 1" || !r.Last.Equal(r2.Last) {
		t.Fatalf("joined range %+v, want Count 2, Attempts 3, Late 90ms, the first tick's error, Last %v", r, r2.Last)
	}
}

func TestAddDoesNotJoinAcrossAGap(t *testing.T) {
	next := every(10 * time.Second)
	var a Account
	a.Add(ok(0, 1), next)
	a.Add(ok(10, 1), next)
	a.Add(ok(30, 1), next) // 20 is missing
	if got, want := describe(&a), "ran/ok 0-10 (2) ran/ok 30-30 (1)"; got != want {
		t.Fatalf("ranges %s, want %s", got, want)
	}
	checkRanges(t, &a, next)
}

// A tick that finishes after the next one (its run took longer) is
// added out of order: it goes between the ranges, and joins both when
// it is of their class and term.
func TestAddOutOfOrder(t *testing.T) {
	next := every(time.Second)
	var a Account
	for _, k := range []int{0, 1, 3, 4} {
		a.Add(ok(k, 1), next)
	}
	if got, want := describe(&a), "ran/ok 0-1 (2) ran/ok 3-4 (2)"; got != want {
		t.Fatalf("before tick 2: %s, want %s", got, want)
	}
	if !a.Add(ok(2, 1), next) {
		t.Fatal("Add(tick 2) = false, want a change")
	}
	if got, want := describe(&a), "ran/ok 0-4 (5)"; got != want {
		t.Errorf("after the late tick 2: %s, want %s (one range)", got, want)
	}
	checkRanges(t, &a, next)

	// Of another class, it stands apart between them.
	var b Account
	for _, k := range []int{0, 1, 3, 4} {
		b.Add(ok(k, 1), next)
	}
	late := ok(2, 1)
	late.Reason = ReasonFailed
	b.Add(late, next)
	if got, want := describe(&b), "ran/ok 0-1 (2) ran/failed 2-2 (1) ran/ok 3-4 (2)"; got != want {
		t.Errorf("after a failed tick 2: %s, want %s", got, want)
	}
	// Before every range, and joining the first.
	var c Account
	c.Add(ok(5, 1), next)
	c.Add(ok(6, 1), next)
	c.Add(ok(4, 1), next)
	c.Add(ok(1, 1), next)
	if got, want := describe(&c), "ran/ok 1-1 (1) ran/ok 4-6 (3)"; got != want {
		t.Errorf("ticks 5, 6, 4, 1: %s, want %s", got, want)
	}
	checkRanges(t, &c, next)
}

func TestAddIsIdempotent(t *testing.T) {
	next := every(time.Second)
	var a Account
	a.Add(span(next, Ran, ReasonOK, sec(0), sec(4)), next)
	for _, r := range []Range{ok(0, 1), ok(2, 1), ok(4, 1), span(next, Ran, ReasonOK, sec(0), sec(4)), span(next, Missed, ReasonUnaccounted, sec(1), sec(3))} {
		if a.Add(r, next) {
			t.Errorf("Add(%s..%s) again = true, want no change", rel(r.First), rel(r.Last))
		}
	}
	if got, want := describe(&a), "ran/ok 0-4 (5)"; got != want {
		t.Fatalf("ranges %s, want %s", got, want)
	}
}

// A range of several ticks that overlaps recorded ones keeps only its
// ticks nobody recorded: before, between and after them.
func TestAddClipsOverlaps(t *testing.T) {
	next := every(5 * time.Second)
	miss := func(first, last int) Range { return span(next, Missed, ReasonNoLeader, sec(first), sec(last)) }
	cases := []struct {
		name string
		have []Range
		add  Range
		want string
	}{
		// Runs are outcomes: they take the place of misses they overlap.
		{"front", []Range{miss(0, 20)}, span(next, Ran, ReasonOK, sec(10), sec(40)), "missed/no-leader 0-5 (2) ran/ok 10-40 (7)"},
		{"back", []Range{miss(20, 40)}, span(next, Ran, ReasonOK, sec(0), sec(30)), "ran/ok 0-30 (7) missed/no-leader 35-40 (2)"},
		{"inside", []Range{miss(0, 40)}, span(next, Ran, ReasonOK, sec(10), sec(30)), "missed/no-leader 0-5 (2) ran/ok 10-30 (5) missed/no-leader 35-40 (2)"},
		{"a cover does not", []Range{miss(0, 20)}, span(next, Covered, ReasonCatchUp, sec(10), sec(40)), "missed/no-leader 0-20 (5) covered/catch-up 25-40 (4)"},
		{"around", []Range{ok(20, 1), ok(25, 1)}, miss(0, 50), "missed/no-leader 0-15 (4) ran/ok 20-25 (2) missed/no-leader 30-50 (5)"},
		{"across three", []Range{ok(10, 1), ok(25, 1), ok(30, 1), ok(45, 1)}, miss(5, 60),
			"missed/no-leader 5-5 (1) ran/ok 10-10 (1) missed/no-leader 15-20 (2) ran/ok 25-30 (2) missed/no-leader 35-40 (2) ran/ok 45-45 (1) missed/no-leader 50-60 (3)"},
		{"joins the one before", []Range{miss(0, 10), ok(20, 1)}, miss(5, 25), "missed/no-leader 0-15 (4) ran/ok 20-20 (1) missed/no-leader 25-25 (1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a Account
			var before int64
			for _, r := range c.have {
				a.Add(r, next)
				before += r.Count
			}
			a.Add(c.add, next)
			if got := describe(&a); got != c.want {
				t.Errorf("ranges:\n got %s\nwant %s", got, c.want)
			}
			checkRanges(t, &a, next)
			// Every tick of the added range is recorded once.
			first, last := c.add.First, c.add.Last
			for _, r := range c.have {
				first, last = earlier(first, r.First), later(last, r.Last)
			}
			var total int64
			for _, r := range a.Ranges {
				total += r.Count
			}
			if want := recorded(next, first, last, c.have, c.add); total != want {
				t.Errorf("%d ticks recorded, want %d", total, want)
			}
		})
	}
}

// recorded counts the ticks of first..last that one of rs holds.
func recorded(next Next, first, last time.Time, rs ...any) int64 {
	var all []Range
	for _, x := range rs {
		switch v := x.(type) {
		case Range:
			all = append(all, v)
		case []Range:
			all = append(all, v...)
		}
	}
	n := int64(0)
	for c := first; !c.After(last); c = next(c) {
		for _, r := range all {
			if !c.Before(r.First) && !c.After(r.Last) {
				n++
				break
			}
		}
	}
	return n
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func TestAddCutsTheError(t *testing.T) {
	next := every(time.Second)
	var a Account
	r := ok(0, 1)
	r.Reason, r.Error = ReasonFailed, strings.Repeat("e", 300)
	a.Add(r, next)
	if got := len(a.Ranges[0].Error); got != MaxError {
		t.Errorf("a 300-byte error is stored as %d bytes, want %d", got, MaxError)
	}
	// Cut on a character, not inside one.
	r = ok(1, 2)
	r.Reason, r.Error = ReasonFailed, strings.Repeat("e", MaxError-1)+"é and more"
	a.Add(r, next)
	if e := a.Ranges[1].Error; !utf8.ValidString(e) || e != strings.Repeat("e", MaxError-1) {
		t.Errorf("an error with a two-byte character across byte %d is stored as %q (%d bytes, valid UTF-8 %v), want the %d bytes before it",
			MaxError, e[len(e)-3:], len(e), utf8.ValidString(e), MaxError-1)
	}
}

func TestAddDropsFoldedTicks(t *testing.T) {
	next := every(time.Second)
	a := Account{FoldedThrough: sec(9), Folded: map[Class]int64{Ran: 10}}
	if a.Add(ok(9, 1), next) || a.Add(ok(3, 1), next) {
		t.Fatal("Add of a tick at or before FoldedThrough = true, want no change")
	}
	if !a.Add(span(next, Missed, ReasonUnaccounted, sec(5), sec(12)), next) {
		t.Fatal("Add(5..12) = false, want its ticks after 9")
	}
	if got, want := describe(&a), "missed/unaccounted 10-12 (3)"; got != want {
		t.Fatalf("ranges %s, want %s", got, want)
	}
	if got := a.Through(); !got.Equal(sec(12)) {
		t.Errorf("Through = %s, want 12", rel(got))
	}
	if got := (&Account{FoldedThrough: sec(9)}).Through(); !got.Equal(sec(9)) {
		t.Errorf("Through of an account folded through 9 without ranges = %s, want 9", rel(got))
	}
}

func TestAddRefusesEmptyRanges(t *testing.T) {
	next := every(time.Second)
	var a Account
	backwards := Range{Class: Ran, Reason: ReasonOK, First: sec(5), Last: sec(4), Count: 1}
	if a.Add(Range{Class: Ran, Reason: ReasonOK, First: sec(1), Last: sec(1)}, next) || a.Add(backwards, next) || len(a.Ranges) != 0 {
		t.Fatalf("Add of a range of 0 ticks, or ending before it starts, changed the account: %s", describe(&a))
	}
}

func TestSetSpec(t *testing.T) {
	var a Account
	s := Spec{At: t0, Schedule: "@every 10s", Zone: "UTC"}
	if !a.SetSpec(s) {
		t.Fatal("first SetSpec = false")
	}
	same := s
	same.At = t0.Add(time.Hour)
	if a.SetSpec(same) || len(a.Specs) != 1 {
		t.Fatalf("SetSpec of the spec in force = true or %d specs, want no change", len(a.Specs))
	}
	zone := s
	zone.Zone = "Europe/Paris"
	zone.At = t0.Add(-time.Hour) // before the spec in force: moved after it
	if !a.SetSpec(zone) {
		t.Fatal("SetSpec of another zone = false, want a change")
	}
	if got, want := a.Specs[1].At, t0.Add(time.Nanosecond); !got.Equal(want) {
		t.Errorf("a spec set at an earlier At is in force from %v, want %v", got, want)
	}
	for i := range MaxSpecs + 2 {
		a.SetSpec(Spec{At: t0, Schedule: "@every " + time.Duration(i+1).String(), Zone: "UTC"})
	}
	if len(a.Specs) != MaxSpecs {
		t.Fatalf("%d specs kept, want %d", len(a.Specs), MaxSpecs)
	}
	if got, want := a.Specs[MaxSpecs-1].Schedule, "@every "+time.Duration(MaxSpecs+2).String(); got != want {
		t.Errorf("newest spec %q, want %q", got, want)
	}
	if got, want := a.Specs[0].Schedule, "@every "+time.Duration(3).String(); got != want {
		t.Errorf("oldest spec kept %q, want %q", got, want)
	}
	for i := 1; i < len(a.Specs); i++ {
		if !a.Specs[i].At.After(a.Specs[i-1].At) {
			t.Errorf("spec %d at %v, not after spec %d at %v", i, a.Specs[i].At, i-1, a.Specs[i-1].At)
		}
	}
}

// Missed ticks of two spans in which nobody led stay apart; pieces of
// one span join, and the span reaches the latest end known.
func TestAddKeepsEachNobodyLedSpan(t *testing.T) {
	next := every(10 * time.Second)
	gap := func(k, from, until int) Range {
		r := span(next, Missed, ReasonNoLeader, sec(k), sec(k))
		r.NobodyFrom, r.NobodyUntil = sec(from), sec(until)
		return r
	}
	var a Account
	a.Add(gap(120, 115, 125), next)
	a.Add(gap(130, 128, 145), next)
	a.Add(gap(140, 128, 145), next)
	if got, want := describe(&a), "missed/no-leader 120-120 (1) missed/no-leader 130-140 (2)"; got != want {
		t.Fatalf("ranges %s, want %s", got, want)
	}
	a.Add(gap(150, 128, 155), next)
	if r := a.Ranges[1]; r.Count != 3 || !r.NobodyFrom.Equal(sec(128)) || !r.NobodyUntil.Equal(sec(155)) {
		t.Errorf("range %s-%s (%d) nobody led %s-%s, want 130-150 (3), 128-155", rel(r.First), rel(r.Last), r.Count, rel(r.NobodyFrom), rel(r.NobodyUntil))
	}
}
