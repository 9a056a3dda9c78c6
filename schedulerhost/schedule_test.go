package schedulerhost_test

// Tests of when a schedule's ticks fire: time zones and DST (tz.go),
// steps of the wall clock (clock.go), and jitter (jitter.go).

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/ledger"
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
// ledger's last claimed tick, computes the same ticks), and schedules
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

const zoneChildEnv = "BATON_TEST_NO_ZONEINFO"

// The zones load in a minimal container without zoneinfo: the DST tests
// run again in a child process whose ZONEINFO and GOROOT are empty
// directories and, where unshare(1) may mount (a user and mount
// namespace), with /usr/share/zoneinfo hidden under an empty directory
// too. A child process because time.LoadLocation reads ZONEINFO once per
// process, and then still looks in the system directories.
func TestZones_WithoutZoneinfo(t *testing.T) {
	if os.Getenv(zoneChildEnv) != "" {
		t.Skip("in the child")
	}
	empty := t.TempDir()
	args := []string{os.Args[0], "-test.run=^(TestParseSchedule_DST|TestHost_DST|TestZones_Child)$", "-test.count=1", "-test.v"}
	hidden := false
	if _, err := os.Stat("/usr/share/zoneinfo"); err != nil {
		hidden = true // nothing to hide
	} else if exec.Command("unshare", "-rm", "true").Run() == nil {
		args = append([]string{"unshare", "-rm", "sh", "-c", `mount --bind "$0" /usr/share/zoneinfo && exec "$@"`, empty}, args...)
		hidden = true
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), zoneChildEnv+"=1", "ZONEINFO="+empty, "GOROOT="+empty)
	if hidden {
		cmd.Env = append(cmd.Env, zoneChildEnv+"_HIDDEN=1")
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestZones_Child") {
		t.Fatalf("child (%q): %v\n%s", args, err, out)
	}
	if !hidden {
		t.Log("/usr/share/zoneinfo was not hidden (unshare -rm not allowed here): the child ran with ZONEINFO and GOROOT empty only")
	}
}

// In the child: the system zoneinfo is out of reach (when it could be
// hidden), and the zones still load.
func TestZones_Child(t *testing.T) {
	if os.Getenv(zoneChildEnv) == "" {
		t.Skip("only in the child process of TestZones_WithoutZoneinfo")
	}
	if os.Getenv(zoneChildEnv+"_HIDDEN") != "" {
		if _, err := os.Stat("/usr/share/zoneinfo/America/New_York"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("system zoneinfo still visible: %v", err)
		}
	}
	for _, z := range []string{newYork, berlin, lordHowe} {
		if _, err := time.LoadLocation(z); err != nil {
			t.Errorf("LoadLocation(%q): %v", z, err)
		}
		if _, err := schedulerhost.ParseSchedule("CRON_TZ=" + z + " 30 2 * * *"); err != nil {
			t.Errorf("ParseSchedule: %v", err)
		}
	}
}

// An unknown zone in CRON_TZ= is an error naming the job, the field and
// the value.
func TestConfig_UnknownZone(t *testing.T) {
	cfg := schedulerhost.Config{Jobs: []schedulerhost.Job{{
		Name: "report", Schedule: "CRON_TZ=Mars/Olympus_Mons 30 2 * * *", Run: func(context.Context) error { return nil },
	}}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate: no error")
	}
	for _, want := range []string{`job "report"`, "Schedule", "Mars/Olympus_Mons"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v: does not name %s", err, want)
		}
	}
	t.Log(err)
}

// misfires counts what an Observer hears about missed ticks.
type misfires struct {
	misfired atomic.Int64
	skipped  atomic.Int64
}

func (o *misfires) RunStarted(string, time.Time, time.Duration)      {}
func (o *misfires) RunFinished(string, ledger.Result, time.Duration) {}
func (o *misfires) Misfired(_ string, n int)                         { o.misfired.Add(int64(n)) }
func (o *misfires) OverlapSkipped(string)                            { o.skipped.Add(1) }
func (o *misfires) Drained(time.Duration, int)                       {}

// tickLog records each run's tick (with its CatchUp flag) and start time,
// and how many runs were going at once.
type tickLog struct {
	overlapLog
	mu    sync.Mutex
	runs  []schedulerhost.Tick
	start []time.Time
}

func (l *tickLog) job(took time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		l.overlapLog.start(ctx)
		defer l.overlapLog.end(ctx)
		tk, _ := schedulerhost.TickFromContext(ctx)
		l.mu.Lock()
		l.runs = append(l.runs, tk)
		l.start = append(l.start, time.Now())
		l.mu.Unlock()
		time.Sleep(took)
		return nil
	}
}

// offsets returns the runs' ticks as offsets from t0, in tick order, and
// the offsets of the catch-up runs.
func (l *tickLog) offsets(t0 time.Time) (all, catchUp []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.runs {
		all = append(all, r.Time.Sub(t0))
		if r.CatchUp {
			catchUp = append(catchUp, r.Time.Sub(t0))
		}
	}
	slices.Sort(all)
	slices.Sort(catchUp)
	return all, catchUp
}

func secs(s ...int) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, n := range s {
		out[i] = time.Duration(n) * time.Second
	}
	return out
}

// short prints a long list of offsets by its ends.
func short(d []time.Duration) any {
	if len(d) <= 12 {
		return d
	}
	return struct {
		N           int
		First, Last []time.Duration
	}{len(d), d[:5], d[len(d)-5:]}
}

// stepRig is a node "a" whose Host reads a SteppingClock and runs one
// job "j" every second, its runs logged in l, with an Observer counting
// misfires.
type stepRig struct {
	n     *node
	clk   *schedulerhost.SteppingClock
	l     tickLog
	obs   misfires
	t0    time.Time // the wall clock at the start
	mono0 time.Time // the process clock at the start
}

// startStepped starts a stepRig for job (its Name, Schedule and Run are
// set here), whose runs take took each.
func startStepped(t *testing.T, job schedulerhost.Job, took time.Duration) *stepRig {
	t.Helper()
	r := &stepRig{clk: schedulerhost.NewSteppingClock(), mono0: time.Now()}
	r.t0 = r.clk.Wall()
	job.Name, job.Schedule, job.Run = "j", "@every 1s", r.l.job(took)
	r.n = startNode(t, newMemory(), "a", schedulerhost.Config{Observer: &r.obs, Jobs: []schedulerhost.Job{job}},
		func(h *schedulerhost.Host) { h.UseClock(r.clk) })
	return r
}

// A forward step of the wall clock while leading: the ticks it skipped
// over are missed ticks under the job's Misfire policy (grace and cap as
// in a catch-up at term start), not replayed. With OverlapAllow the old
// loop started one run per skipped tick, all at once.
func TestHost_WallClockStepForward_IsAMisfire(t *testing.T) {
	for _, tc := range []struct {
		policy   schedulerhost.Misfire
		grace    time.Duration
		maxCatch int
		catchUp  []time.Duration // the skipped-over ticks run, as offsets from the term's start
	}{
		{schedulerhost.MisfireSkip, 0, 0, nil},
		{schedulerhost.MisfireRunOnce, 0, 0, secs(3604)},
		{schedulerhost.MisfireRunAll, 10 * time.Second, 3, secs(3602, 3603, 3604)},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rig := startStepped(t, schedulerhost.Job{Overlap: schedulerhost.OverlapAllow,
					Misfire: tc.policy, MisfireGrace: tc.grace, MaxCatchUp: tc.maxCatch}, 100*time.Millisecond)
				n, clk, l, obs, t0 := rig.n, rig.clk, &rig.l, &rig.obs, rig.t0
				time.Sleep(3500 * time.Millisecond) // ticks +1 s, +2 s, +3 s ran
				clk.Step(time.Hour)                 // the wall clock now reads +1h3.5s
				time.Sleep(2 * time.Second)         // to +5.5 s on the monotonic clock
				n.stop(t)

				all, catchUp := l.offsets(t0)
				// +4 s was due on the monotonic clock when the loop woke:
				// it runs as usual. +5 s..+1h4s were skipped over; the
				// first tick after the step, +1h5s, runs as usual.
				want := append(append(secs(1, 2, 3, 4), tc.catchUp...), secs(3605)...)
				if !slices.Equal(all, want) {
					t.Errorf("ran ticks %v, want %v", short(all), want)
				}
				if !slices.Equal(catchUp, tc.catchUp) {
					t.Errorf("catch-up runs %v, want %v", short(catchUp), tc.catchUp)
				}
				if got, want := obs.misfired.Load(), int64(3600-len(tc.catchUp)); got != want {
					t.Errorf("misfired %d ticks, want %d (3600 skipped over, %d run)", got, want, len(tc.catchUp))
				}
				l.overlapLog.mu.Lock()
				defer l.overlapLog.mu.Unlock()
				if l.maxGoing > 2 {
					t.Errorf("%d runs going at once, want at most 2 (the tick due before the step, and the catch-up runs one after another)", l.maxGoing)
				}
			})
		})
	}
}

// A backward step of the wall clock while leading: no stall and no tick
// twice. The next tick fires when the monotonic clock says it is due, as
// if the wall clock had not moved, and every tick fired is newer than the
// last one fired before. When the wall clock comes forward again to the
// schedule, nothing counts as missed.
func TestHost_WallClockStepBack_NoStallNoRepeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := startStepped(t, schedulerhost.Job{}, 0)
		n, clk, l, obs, t0, mono0 := rig.n, rig.clk, &rig.l, &rig.obs, rig.t0, rig.mono0
		time.Sleep(3500 * time.Millisecond) // ticks +1 s, +2 s, +3 s ran
		clk.Step(-time.Hour)                // the wall clock now reads -59m56.5s
		time.Sleep(3 * time.Second)         // to +6.5 s on the monotonic clock
		clk.Step(time.Hour)                 // the wall clock is right again
		time.Sleep(2 * time.Second)         // to +8.5 s
		n.stop(t)

		all, catchUp := l.offsets(t0)
		if want := secs(1, 2, 3, 4, 5, 6, 7, 8); !slices.Equal(all, want) {
			t.Errorf("ran ticks %v, want %v: each once, none stalled", short(all), want)
		}
		if len(catchUp) != 0 || obs.misfired.Load() != 0 {
			t.Errorf("catch-up runs %v, misfired %d: want none", catchUp, obs.misfired.Load())
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, r := range l.runs {
			// Started on time by the monotonic clock: tick +k s at +k s.
			if got, want := l.start[i].Sub(mono0), r.Time.Sub(t0); got != want {
				t.Errorf("tick +%v started at +%v on the monotonic clock, want +%v", want, got, want)
			}
		}
	})
}

// A forward step of years (a host whose clock was reset, synced late) on a
// per-second job: far more skipped-over ticks than the Host walks. The
// newest one still runs under run-once, and the schedule goes on from the
// new wall clock.
func TestHost_WallClockStepForward_Years(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := startStepped(t, schedulerhost.Job{Overlap: schedulerhost.OverlapAllow}, 0)
		n, clk, l, obs, t0 := rig.n, rig.clk, &rig.l, &rig.obs, rig.t0
		time.Sleep(1500 * time.Millisecond)
		const years = 10 * 365 * 24 * time.Hour
		clk.Step(years)
		time.Sleep(2 * time.Second) // to +3.5 s on the monotonic clock
		n.stop(t)
		all, catchUp := l.offsets(t0)
		if want := []time.Duration{time.Second, 2 * time.Second, years + 2*time.Second, years + 3*time.Second}; !slices.Equal(all, want) {
			t.Errorf("ran ticks %v, want %v", short(all), want)
		}
		if want := []time.Duration{years + 2*time.Second}; !slices.Equal(catchUp, want) {
			t.Errorf("catch-up runs %v, want %v", catchUp, want)
		}
		if obs.misfired.Load() < 99999 {
			t.Errorf("misfired %d ticks, want at least 99999", obs.misfired.Load())
		}
	})
}

// The line with which the schedule loop says the wall clock stepped
// forward carries the term's token and the gap it skipped over, under the
// keys the e2e checker reads ("token", "from", "to"): a tick in the gap
// may go unrun only as its policy says, and the checker ties the gap to a
// pause of the machine it saw itself. Renaming a key fails here.
func TestHost_WallClockStepForward_LogsTheGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out envtest.Buffer
		clk := schedulerhost.NewSteppingClock()
		job := schedulerhost.Job{Name: "j", Schedule: "@every 1s", Misfire: schedulerhost.MisfireSkip,
			Run: func(context.Context) error { return nil }}
		n := startNode(t, newMemory(), "a", schedulerhost.Config{Jobs: []schedulerhost.Job{job},
			Logger: slog.New(slog.NewJSONHandler(&out, nil))}, func(h *schedulerhost.Host) { h.UseClock(clk) })
		time.Sleep(1500 * time.Millisecond)
		before := clk.Wall()
		clk.Step(time.Minute)
		time.Sleep(time.Second)
		n.stop(t)

		var line struct {
			Token    uint64
			From, To time.Time
		}
		found := false
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, `"msg":"wall clock stepped forward: the ticks it skipped over count as missed"`) {
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatalf("%v: %s", err, l)
				}
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("no step line in:\n%s", out.String())
		}
		if line.Token == 0 {
			t.Errorf("step line without the term's token")
		}
		if line.From.Before(before) || line.From.After(before.Add(500*time.Millisecond)) {
			t.Errorf("gap from %v, want within 500ms after %v, the wall clock before the step", line.From, before)
		}
		if gap := line.To.Sub(line.From); gap < time.Minute || gap > time.Minute+500*time.Millisecond {
			t.Errorf("gap %v (%v to %v), want the step of 1m", gap, line.From, line.To)
		}
	})
}

func TestJitterDelay(t *testing.T) {
	tick := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	const jitter = 30 * time.Second
	d := schedulerhost.JitterDelay("report", tick, jitter)
	if d < 0 || d >= jitter {
		t.Fatalf("JitterDelay = %v, want in [0, %v)", d, jitter)
	}
	// The same instant in another zone, asked again: the same delay.
	if again := schedulerhost.JitterDelay("report", tick.In(time.FixedZone("X", 3600)), jitter); again != d {
		t.Errorf("JitterDelay of the same tick in another zone = %v, want %v", again, d)
	}
	// It spreads: ticks and jobs get different delays.
	seen := map[time.Duration]bool{d: true}
	for i := 1; i < 20; i++ {
		seen[schedulerhost.JitterDelay("report", tick.Add(time.Duration(i)*time.Minute), jitter)] = true
		seen[schedulerhost.JitterDelay("report"+string(rune('a'+i)), tick, jitter)] = true
	}
	if len(seen) < 35 {
		t.Errorf("%d distinct delays of 39, want them spread", len(seen))
	}
	if z := schedulerhost.JitterDelay("report", tick, 0); z != 0 {
		t.Errorf("JitterDelay without jitter = %v, want 0", z)
	}
}

// runLog records runs of jobs: the tick, the start, the token.
type runLog struct {
	mu   sync.Mutex
	runs []loggedRun
}

type loggedRun struct {
	job     string
	tick    time.Time
	at      time.Time
	token   uint64
	catchUp bool
}

func (l *runLog) add(ctx context.Context) {
	tk, _ := schedulerhost.TickFromContext(ctx)
	tok, _ := election.TokenFromContext(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, loggedRun{tk.Job, tk.Time, time.Now(), tok, tk.CatchUp})
}

func (l *runLog) of(job string) []loggedRun { return runsOf(&l.mu, &l.runs, job) }

func (r loggedRun) jobName() string { return r.job }

// latenessObserver records the lateness the Host reports per job.
type latenessObserver struct {
	retryObserver
	mu   sync.Mutex
	late map[string][]time.Duration
}

func (o *latenessObserver) RunStarted(job string, _ time.Time, late time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.late == nil {
		o.late = map[string][]time.Duration{}
	}
	o.late[job] = append(o.late[job], late)
}

// TestHost_JitterDelaysTheStartNotTheTick: a jittered run starts
// JitterDelay after its tick, with the nominal tick in its context and
// the ledger; the run of another job at the same instant is claimed and
// started at once, not held up by the jittered one's wait.
func TestHost_JitterDelaysTheStartNotTheTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var log runLog
		o := &latenessObserver{}
		run := func(ctx context.Context) error { log.add(ctx); return nil }
		n := startNode(t, m, "a", schedulerhost.Config{Observer: o, Jobs: []schedulerhost.Job{
			{Name: "spread", Schedule: "0 * * * * *", Jitter: 30 * time.Second, Run: run},
			{Name: "plain", Schedule: "0 * * * * *", Run: run},
		}})
		time.Sleep(3*time.Minute + 45*time.Second)
		n.stop(t)
		spread, plain := log.of("spread"), log.of("plain")
		if len(spread) != 3 || len(plain) != 3 {
			t.Fatalf("%d and %d runs, want 3 of each", len(spread), len(plain))
		}
		for i, r := range spread {
			want := time.Date(2000, 1, 1, 0, i+1, 0, 0, time.UTC) // synctest's clock starts at 2000-01-01 UTC
			if !r.tick.Equal(want) {
				t.Errorf("run %d: TickFromContext %v, want the nominal %v", i, r.tick, want)
			}
			if d := schedulerhost.JitterDelay("spread", r.tick, 30*time.Second); !r.at.Equal(r.tick.Add(d)) || d == 0 {
				t.Errorf("run of %v started at %v, want its tick + JitterDelay %v", r.tick, r.at, d)
			}
			if !plain[i].at.Equal(plain[i].tick) {
				t.Errorf("plain run of %v started at %v: held up by the jittered run of its instant", plain[i].tick, plain[i].at)
			}
		}
		hist, _ := m.Ledger().History(context.Background(), "spread", 10)
		for i, h := range hist {
			if want := spread[len(spread)-1-i]; !h.Tick.Equal(want.tick) || !h.Started.Equal(want.at) || h.Result != ledger.ResultOK {
				t.Errorf("history %d = %+v, want tick %v started %v, ok", i, h, want.tick, want.at)
			}
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, late := range o.late["spread"] {
			if late != 0 {
				t.Errorf("lateness %v, want 0 (measured from the tick plus its delay)", late)
			}
		}
	})
}

// TestHost_JitterFailover: a leader lost during a run's jitter wait has
// not claimed the tick; the next leader runs it once (a missed tick,
// caught up), and computes the same delays for the ticks after.
func TestHost_JitterFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var log runLog
		jobs := []schedulerhost.Job{{Name: "spread", Schedule: "0 * * * * *", Jitter: 30 * time.Second,
			Run: func(ctx context.Context) error { log.add(ctx); return nil }}}
		a := startNode(t, m, "a", schedulerhost.Config{Jobs: jobs})
		b := startNode(t, m, "b", schedulerhost.Config{Jobs: jobs})
		if !a.elector.IsLeader() {
			t.Fatal("a does not lead")
		}
		tick2 := time.Date(2000, 1, 1, 0, 2, 0, 0, time.UTC)
		d2 := schedulerhost.JitterDelay("spread", tick2, 30*time.Second)
		if d2 < 2*time.Second {
			t.Fatalf("the test wants a delay of 2s or more at %v, has %v", tick2, d2)
		}
		time.Sleep(time.Until(tick2.Add(time.Second))) // a waits the delay of tick 2
		if !m.Revoke() {
			t.Fatal("no lease to revoke")
		}
		synctest.Wait()
		if !b.elector.IsLeader() {
			t.Fatal("b does not lead after a's loss")
		}
		time.Sleep(time.Until(tick2.Add(2 * time.Minute)))
		a.stop(t)
		b.stop(t)
		runs := log.of("spread")
		byTick := map[time.Time][]loggedRun{}
		for _, r := range runs {
			byTick[r.tick] = append(byTick[r.tick], r)
		}
		if got := byTick[tick2]; len(got) != 1 || !got[0].catchUp || got[0].token == 1 {
			t.Fatalf("runs of %v: %+v; want one, a catch-up by b", tick2, got)
		}
		for tick, rs := range byTick {
			if len(rs) != 1 {
				t.Errorf("tick %v ran %d times", tick, len(rs))
			}
			if r := rs[0]; !r.catchUp {
				if d := schedulerhost.JitterDelay("spread", tick, 30*time.Second); !r.at.Equal(tick.Add(d)) {
					t.Errorf("run of %v (token %d) started at %v, want its tick + JitterDelay %v", tick, r.token, r.at, d)
				}
			}
		}
		if len(byTick) != 3 { // 1m by a, 2m caught up by b, 3m by b
			t.Errorf("ticks run: %d, want 3 (%+v)", len(byTick), runs)
		}
		hist, _ := m.Ledger().History(context.Background(), "spread", 10)
		for _, h := range hist {
			if h.Tick.Equal(tick2) && (h.Token != byTick[tick2][0].token || h.Result != ledger.ResultOK) {
				t.Errorf("history of %v: %+v, want b's run, ok", tick2, h)
			}
		}
	})
}
