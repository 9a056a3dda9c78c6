package schedulerhost_test

import (
	"slices"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/batonhq/baton/schedulerhost"
)

// The six DST transitions the tests run across: America/New_York and
// Europe/Berlin (one hour), Australia/Lord_Howe (30 minutes).
//
//	New York   2027-03-14 02:00 EST -> 03:00 EDT   2026-11-01 02:00 EDT -> 01:00 EST
//	Berlin     2027-03-28 02:00 CET -> 03:00 CEST  2026-10-25 03:00 CEST -> 02:00 CET
//	Lord Howe  2026-10-04 02:00 +1030 -> 02:30 +11 2027-04-04 02:00 +11 -> 01:30 +1030
//
// Berlin repeats 02:00-02:59 at fall-back (not 01:xx as New York does).
const (
	newYork  = "America/New_York"
	berlin   = "Europe/Berlin"
	lordHowe = "Australia/Lord_Howe"
)

// dstCase is a schedule across one transition: the ticks in [from, to)
// (local times) that baton's policy gives, and those robfig/cron v3 gives
// on its own.
type dstCase struct {
	zone, spec string
	from, to   string // "2006-01-02 15:04", local
	baton      []string
	robfig     []string // nil: same as baton
}

func dstCases() []dstCase {
	return []dstCase{
		// New York, spring-forward 2027-03-14: 02:00-02:59 do not exist.
		{zone: newYork, spec: "30 2 * * *", from: "2027-03-13 00:00", to: "2027-03-16 00:00",
			baton:  []string{"03-13 02:30 EST", "03-14 03:00 EDT", "03-15 02:30 EDT"},
			robfig: []string{"03-13 02:30 EST", "03-15 02:30 EDT"}},
		{zone: newYork, spec: "*/20 2 * * *", from: "2027-03-14 00:00", to: "2027-03-14 06:00",
			baton:  []string{"03-14 03:00 EDT"},
			robfig: []string{}},
		{zone: newYork, spec: "0 * * * *", from: "2027-03-14 00:00", to: "2027-03-14 05:00",
			baton: []string{"03-14 00:00 EST", "03-14 01:00 EST", "03-14 03:00 EDT", "03-14 04:00 EDT"}},
		// New York, fall-back 2026-11-01: 01:00-01:59 happen twice.
		{zone: newYork, spec: "30 1 * * *", from: "2026-10-31 00:00", to: "2026-11-03 00:00",
			baton:  []string{"10-31 01:30 EDT", "11-01 01:30 EDT", "11-02 01:30 EST"},
			robfig: []string{"10-31 01:30 EDT", "11-01 01:30 EDT", "11-01 01:30 EST", "11-02 01:30 EST"}},
		{zone: newYork, spec: "*/20 1 * * *", from: "2026-11-01 00:00", to: "2026-11-01 06:00",
			baton: []string{"11-01 01:00 EDT", "11-01 01:20 EDT", "11-01 01:40 EDT"},
			robfig: []string{"11-01 01:00 EDT", "11-01 01:20 EDT", "11-01 01:40 EDT",
				"11-01 01:00 EST", "11-01 01:20 EST", "11-01 01:40 EST"}},
		{zone: newYork, spec: "0 * * * *", from: "2026-11-01 00:00", to: "2026-11-01 04:00",
			baton: []string{"11-01 00:00 EDT", "11-01 01:00 EDT", "11-01 01:00 EST", "11-01 02:00 EST", "11-01 03:00 EST"}},
		// Berlin, spring-forward 2027-03-28: 02:00-02:59 do not exist.
		{zone: berlin, spec: "30 2 * * *", from: "2027-03-27 00:00", to: "2027-03-30 00:00",
			baton:  []string{"03-27 02:30 CET", "03-28 03:00 CEST", "03-29 02:30 CEST"},
			robfig: []string{"03-27 02:30 CET", "03-29 02:30 CEST"}},
		{zone: berlin, spec: "0 * * * *", from: "2027-03-28 00:00", to: "2027-03-28 05:00",
			baton: []string{"03-28 00:00 CET", "03-28 01:00 CET", "03-28 03:00 CEST", "03-28 04:00 CEST"}},
		// Berlin, fall-back 2026-10-25: 02:00-02:59 happen twice.
		{zone: berlin, spec: "30 2 * * *", from: "2026-10-24 00:00", to: "2026-10-27 00:00",
			baton:  []string{"10-24 02:30 CEST", "10-25 02:30 CEST", "10-26 02:30 CET"},
			robfig: []string{"10-24 02:30 CEST", "10-25 02:30 CEST", "10-25 02:30 CET", "10-26 02:30 CET"}},
		{zone: berlin, spec: "0 * * * *", from: "2026-10-25 01:00", to: "2026-10-25 05:00",
			baton: []string{"10-25 01:00 CEST", "10-25 02:00 CEST", "10-25 02:00 CET", "10-25 03:00 CET", "10-25 04:00 CET"}},
		// Lord Howe, spring-forward 2026-10-04: 02:00-02:29 do not exist.
		{zone: lordHowe, spec: "15 2 * * *", from: "2026-10-03 00:00", to: "2026-10-06 00:00",
			baton:  []string{"10-03 02:15 +1030", "10-04 02:30 +11", "10-05 02:15 +11"},
			robfig: []string{"10-03 02:15 +1030", "10-05 02:15 +11"}},
		{zone: lordHowe, spec: "0 * * * *", from: "2026-10-04 00:00", to: "2026-10-04 05:00",
			baton: []string{"10-04 00:00 +1030", "10-04 01:00 +1030", "10-04 03:00 +11", "10-04 04:00 +11"}},
		{zone: lordHowe, spec: "30 * * * *", from: "2026-10-04 00:00", to: "2026-10-04 05:00",
			baton: []string{"10-04 00:30 +1030", "10-04 01:30 +1030", "10-04 02:30 +11", "10-04 03:30 +11", "10-04 04:30 +11"}},
		// Lord Howe, fall-back 2027-04-04: 01:30-01:59 happen twice.
		{zone: lordHowe, spec: "45 1 * * *", from: "2027-04-03 00:00", to: "2027-04-06 00:00",
			baton:  []string{"04-03 01:45 +11", "04-04 01:45 +11", "04-05 01:45 +1030"},
			robfig: []string{"04-03 01:45 +11", "04-04 01:45 +11", "04-04 01:45 +1030", "04-05 01:45 +1030"}},
		{zone: lordHowe, spec: "0 * * * *", from: "2027-04-04 00:00", to: "2027-04-04 04:00",
			baton: []string{"04-04 00:00 +11", "04-04 01:00 +11", "04-04 02:00 +1030", "04-04 03:00 +1030"}},
		{zone: lordHowe, spec: "45 * * * *", from: "2027-04-04 00:00", to: "2027-04-04 04:00",
			baton: []string{"04-04 00:45 +11", "04-04 01:45 +11", "04-04 01:45 +1030", "04-04 02:45 +1030", "04-04 03:45 +1030"}},
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func localTime(t *testing.T, loc *time.Location, s string) time.Time {
	t.Helper()
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ticksIn lists s's ticks in [from, to) as local times, checking that they
// strictly increase.
func ticksIn(t *testing.T, s cron.Schedule, loc *time.Location, from, to time.Time) []string {
	t.Helper()
	out := []string{}
	prev := from.Add(-time.Second)
	for n := s.Next(prev); !n.IsZero() && n.Before(to); n = s.Next(n) {
		if !n.After(prev) {
			t.Fatalf("Next(%v) = %v: not after it", prev, n)
		}
		if len(out) > 10000 {
			t.Fatalf("more than 10000 ticks from %v to %v", from, to)
		}
		out = append(out, n.In(loc).Format("01-02 15:04 MST"))
		prev = n
	}
	return out
}

// Baton's DST policy at the six transitions, through ParseSchedule with a
// CRON_TZ= prefix and through a Host's default Location (a spec without
// CRON_TZ= is read in the zone of the time given to Next).
func TestParseSchedule_DST(t *testing.T) {
	for _, tc := range dstCases() {
		t.Run(tc.zone+"/"+tc.from[:10]+"/"+tc.spec, func(t *testing.T) {
			loc := mustZone(t, tc.zone)
			from, to := localTime(t, loc, tc.from), localTime(t, loc, tc.to)
			for _, spec := range []string{"CRON_TZ=" + tc.zone + " " + tc.spec, tc.spec} {
				s, err := schedulerhost.ParseSchedule(spec)
				if err != nil {
					t.Fatal(err)
				}
				if got := ticksIn(t, s, loc, from, to); !slices.Equal(got, tc.baton) {
					t.Errorf("%q: ticks %q, want %q", spec, got, tc.baton)
				}
			}
		})
	}
}

// What robfig/cron v3 does on its own at the same transitions: the README
// compares it with baton's policy. It skips a local time that a
// spring-forward skips, and runs twice a local time that a fall-back
// repeats.
func TestRobfigCron_DST(t *testing.T) {
	for _, tc := range dstCases() {
		t.Run(tc.zone+"/"+tc.from[:10]+"/"+tc.spec, func(t *testing.T) {
			loc := mustZone(t, tc.zone)
			s, err := schedulerhost.ParseUnwrapped("CRON_TZ=" + tc.zone + " " + tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.robfig
			if want == nil {
				want = tc.baton
			}
			if got := ticksIn(t, s, loc, localTime(t, loc, tc.from), localTime(t, loc, tc.to)); !slices.Equal(got, want) {
				t.Errorf("ticks %q, want %q", got, want)
			}
		})
	}
}
