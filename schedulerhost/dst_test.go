package schedulerhost_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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
		// robfig's minute loop runs from 01:59 +1030 into 02:30 +11 without
		// checking the hour again: a 01:45 job also runs at 02:45.
		{zone: lordHowe, spec: "45 1 * * *", from: "2026-10-03 12:00", to: "2026-10-05 00:00",
			baton:  []string{"10-04 01:45 +1030"},
			robfig: []string{"10-04 01:45 +1030", "10-04 02:45 +11"}},
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

// ticksIn lists s's ticks in [from, to) as local times (a spec without
// CRON_TZ= read in loc), checking that they
// strictly increase.
func ticksIn(t *testing.T, s cron.Schedule, loc *time.Location, from, to time.Time) []string {
	t.Helper()
	out := []string{}
	prev := from.In(loc).Add(-time.Second)
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

// What robfig/cron v3 does on its own at the same transitions:
// docs/guarantees.md (Time zones and DST) compares it with baton's policy. It skips a local time that a
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

// Around each of the six transitions, for schedules of every kind: ticks
// strictly increase, Next from any instant gives the first tick of the
// chain after it (so a leader starting from its own clock, or from the
// ledger's last claimed tick, computes the same ticks; @every aside, which
// counts from where it starts), and schedules
// whose hour field is "*" (and @every) tick at every real instant: one
// minute, or one hour, apart.
func TestParseSchedule_DSTConsistent(t *testing.T) {
	transitions := []struct{ zone, at string }{
		{newYork, "2027-03-14 01:00"}, {newYork, "2026-11-01 01:00"},
		{berlin, "2027-03-28 01:00"}, {berlin, "2026-10-25 01:00"},
		{lordHowe, "2026-10-04 01:00"}, {lordHowe, "2027-04-04 01:00"},
	}
	specs := []struct {
		spec string
		step time.Duration // >0: ticks exactly this far apart
	}{
		{"* * * * *", time.Minute},
		{"*/10 * * * * *", 10 * time.Second},
		{"0 * * * *", 0}, {"30 * * * *", 0}, {"*/7 * * * *", 0},
		{"@every 1h", time.Hour},
		{"@hourly", 0}, {"@daily", 0}, {"0 */2 * * *", 0},
		{"30 1 * * *", 0}, {"30 2 * * *", 0}, {"45 1 * * *", 0}, {"15 2 * * *", 0},
		{"* 1 * * *", 0}, {"* 2 * * *", 0}, {"15,45 1-3 * * *", 0}, {"0 30 1 * * *", 0},
	}
	for _, tr := range transitions {
		loc := mustZone(t, tr.zone)
		mid := localTime(t, loc, tr.at)
		from, to := mid.Add(-26*time.Hour), mid.Add(26*time.Hour)
		for _, sp := range specs {
			s, err := schedulerhost.ParseSchedule(sp.spec)
			if err != nil {
				t.Fatal(err)
			}
			var chain []time.Time
			for n := s.Next(from.In(loc)); !n.IsZero() && n.Before(to); n = s.Next(n) {
				if len(chain) > 0 && !n.After(chain[len(chain)-1]) {
					t.Fatalf("%s %q: Next(%v) = %v: not after it", tr.zone, sp.spec, chain[len(chain)-1], n)
				}
				if sp.step > 0 && len(chain) > 0 && n.Sub(chain[len(chain)-1]) != sp.step {
					t.Errorf("%s %q: tick %v after %v: want %v apart", tr.zone, sp.spec, n, chain[len(chain)-1], sp.step)
				}
				chain = append(chain, n)
			}
			if len(chain) == 0 {
				t.Fatalf("%s %q: no ticks", tr.zone, sp.spec)
			}
			if sp.spec == "@every 1h" {
				continue // elapsed time from wherever it starts
			}
			i := 0
			for at := from; at.Before(chain[len(chain)-1]); at = at.Add(7*time.Minute + 13*time.Second) {
				for !chain[i].After(at) {
					i++
				}
				if got := s.Next(at.In(loc)); !got.Equal(chain[i]) {
					t.Errorf("%s %q: Next(%v) = %v, want %v (the chain's next tick)", tr.zone, sp.spec, at.In(loc), got.In(loc), chain[i].In(loc))
				}
			}
		}
	}
}

// Transitions unlike the usual ones: a whole day skipped (Samoa moved
// across the date line: 2011-12-29 23:59:59 -11 was followed by
// 2011-12-31 00:00 +14), and a spec that never matches in a zone with DST
// (refused at parse: Next gives up, as robfig's does, without looping).
func TestParseSchedule_DSTOddCases(t *testing.T) {
	apia := mustZone(t, "Pacific/Apia")
	s, err := schedulerhost.ParseSchedule("CRON_TZ=Pacific/Apia 0 12 * * *")
	if err != nil {
		t.Fatal(err)
	}
	got := ticksIn(t, s, apia, localTime(t, apia, "2011-12-29 00:00"), localTime(t, apia, "2012-01-01 00:00"))
	if want := []string{"12-29 12:00 -10", "12-31 00:00 +14", "12-31 12:00 +14"}; !slices.Equal(got, want) {
		t.Errorf("Apia: ticks %q, want %q", got, want)
	}
	// ParseSchedule asks Next once and refuses the spec; it returns at
	// once rather than loop.
	t0 := time.Now()
	if _, err := schedulerhost.ParseSchedule("CRON_TZ=America/New_York 0 0 30 2 *"); err == nil || !strings.Contains(err.Error(), "never fires") {
		t.Errorf("Feb 30: ParseSchedule: %v, want never fires", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Feb 30: ParseSchedule took %v", d)
	}
}

// dstRuns records the ticks each job ran, in the order they started.
type dstRuns struct {
	mu    sync.Mutex
	ticks map[string][]time.Time
}

func (r *dstRuns) run(ctx context.Context) error {
	tk, _ := schedulerhost.TickFromContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ticks[tk.Job] = append(r.ticks[tk.Job], tk.Time)
	return nil
}

// Hosts across each of the six transitions, on a controlled clock, with
// the zone as Config.Location: node a leads from 70 minutes before the
// transition to 10 minutes after it, then node b takes over (from the
// ledger's last claimed ticks) for three hours. The job at a skipped or
// repeated local time runs once, at the instant the policy says; the
// hourly job runs at each real hour; nothing runs twice.
func TestHost_DST(t *testing.T) {
	for _, tc := range []struct {
		zone, transition string // the transition as a UTC instant
		daily            string
		want             string
	}{
		{newYork, "2027-03-14T07:00:00Z", "30 2 * * *", "03-14 03:00 EDT"},
		{newYork, "2026-11-01T06:00:00Z", "30 1 * * *", "11-01 01:30 EDT"},
		{berlin, "2027-03-28T01:00:00Z", "30 2 * * *", "03-28 03:00 CEST"},
		{berlin, "2026-10-25T01:00:00Z", "30 2 * * *", "10-25 02:30 CEST"},
		{lordHowe, "2026-10-03T15:30:00Z", "15 2 * * *", "10-04 02:30 +11"},
		{lordHowe, "2027-04-03T15:00:00Z", "45 1 * * *", "04-04 01:45 +11"},
	} {
		t.Run(tc.zone+"/"+tc.transition, func(t *testing.T) {
			loc := mustZone(t, tc.zone)
			tr, err := time.Parse(time.RFC3339, tc.transition)
			if err != nil {
				t.Fatal(err)
			}
			if before, after := tr.Add(-time.Second).In(loc).Format("-0700"), tr.In(loc).Format("-0700"); before == after {
				t.Fatalf("no transition at %v in %s", tr, tc.zone)
			}
			synctest.Test(t, func(t *testing.T) {
				clk := schedulerhost.NewSteppingClock()
				start := tr.Add(-70 * time.Minute)
				clk.Step(start.Sub(clk.Wall()))
				runs := &dstRuns{ticks: map[string][]time.Time{}}
				cfg := schedulerhost.Config{Location: loc, Jobs: []schedulerhost.Job{
					{Name: "daily", Schedule: tc.daily, Run: runs.run},
					{Name: "hourly", Schedule: "0 * * * *", Run: runs.run},
				}}
				m := newMemory()
				useClock := func(h *schedulerhost.Host) { h.UseClock(clk) }
				a := startNode(t, m, "a", cfg, useClock)
				time.Sleep(80 * time.Minute)
				a.stop(t)
				b := startNode(t, m, "b", cfg, useClock)
				time.Sleep(3 * time.Hour)
				b.stop(t)
				end := clk.Wall()

				runs.mu.Lock()
				defer runs.mu.Unlock()
				var daily []string
				for _, tk := range runs.ticks["daily"] {
					daily = append(daily, tk.In(loc).Format("01-02 15:04 MST"))
				}
				if want := []string{tc.want}; !slices.Equal(daily, want) {
					t.Errorf("daily %q ran ticks %q, want %q", tc.daily, daily, want)
				}
				hourly, _ := schedulerhost.ParseSchedule("0 * * * *")
				want := ticksIn(t, hourly, loc, start, end)
				var got []string
				for _, tk := range runs.ticks["hourly"] {
					got = append(got, tk.In(loc).Format("01-02 15:04 MST"))
				}
				if !slices.Equal(got, want) || len(got) < 4 {
					t.Errorf("hourly ran ticks %q, want %q (each real hour)", got, want)
				}
			})
		})
	}
}
