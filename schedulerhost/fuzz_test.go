package schedulerhost_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/schedulerhost"
)

// fuzzZones are the zones FuzzParseSchedule puts in CRON_TZ= and reads
// specs without one in: DST one way and the other, a 30-minute DST, a
// zone that skipped a day, offsets that are not whole hours.
var fuzzZones = []string{"UTC", newYork, berlin, lordHowe, "Pacific/Apia", "Asia/Kathmandu", "Australia/Adelaide",
	"America/Santiago", "Europe/London", "Asia/Tehran", "America/St_Johns", "Pacific/Chatham"}

// FuzzParseSchedule: ParseSchedule never panics; for a spec it accepts,
// given a CRON_TZ= zone from fuzzZones (or read in one), 50 calls of Next
// from an instant between 1970 and 2100 give strictly increasing ticks
// (or stop at zero), each within five years of the one before, each call
// returning promptly (an @every schedule's within its interval); and Next
// from any instant between two ticks gives the later one: the chain is the
// same wherever it starts.
func FuzzParseSchedule(f *testing.F) {
	for _, tc := range dstCases() {
		f.Add(tc.spec, uint8(0), int64(1793000000), uint16(1234), true)
	}
	for _, s := range []string{"* * * * *", "*/10 * * * * *", "0 * * * *", "*/7 * * * *", "@every 1h", "@hourly", "@daily",
		"0 */2 * * *", "15,45 1-3 * * *", "0 30 1 * * *", "0 0 30 2 *", "0 12 * * *", "@yearly", "0 0 29 2 *",
		"CRON_TZ=UTC", "TZ=Europe/Berlin 0 3 * * 0", "CRON_TZ=America/New_York 30 2 * * *", "@every 0s",
		"@every 7s", "@every 2h offset 15m", "@every 100000h offset 99999h", "@every 1s offset 1s"} {
		for z := range uint8(3) {
			f.Add(s, z, int64(1790000000+int(z)*86400*77), uint16(z)*999, z == 1)
		}
	}
	f.Fuzz(func(t *testing.T, spec string, zone uint8, start int64, frac uint16, tz bool) {
		zname := fuzzZones[int(zone)%len(fuzzZones)]
		loc, err := time.LoadLocation(zname)
		if err != nil {
			t.Fatal(err)
		}
		if tz && !strings.HasPrefix(spec, "TZ=") && !strings.HasPrefix(spec, "CRON_TZ=") {
			spec = "CRON_TZ=" + zname + " " + spec
		}
		s, err := schedulerhost.ParseSchedule(spec)
		if err != nil {
			return
		}
		const lo, hi = 0, 4102444800 // 1970 to 2100
		if start < lo || start > hi {
			start = lo + (start%(hi-lo)+(hi-lo))%(hi-lo)
		}
		next := func(at time.Time) time.Time {
			t0 := time.Now()
			n := s.Next(at)
			if d := time.Since(t0); d > 5*time.Second {
				t.Fatalf("%q: Next(%v) took %v", spec, at, d)
			}
			return n
		}
		e, every := s.(schedulerhost.EverySchedule)
		prev := time.Unix(start, int64(frac)*15259).In(loc) // frac spreads over a second
		for i := range 50 {
			n := next(prev)
			if n.IsZero() {
				return
			}
			if !n.After(prev) {
				t.Fatalf("%q: step %d: Next(%v) = %v: not after it", spec, i, prev, n)
			}
			if !every && n.After(prev.AddDate(5, 0, 1)) {
				t.Fatalf("%q: Next(%v) = %v: more than five years on", spec, prev, n)
			}
			if every && (n.Sub(prev) > e.Every || (n.Unix()-int64(e.Offset/time.Second))%int64(e.Every/time.Second) != 0) {
				t.Fatalf("%q: Next(%v) = %v: not the next whole multiple of %v since the epoch, plus %v", spec, prev, n, e.Every, e.Offset)
			}
			// An instant between the two ticks, frac/65536 of the way.
			mid := prev.Add(time.Duration(float64(n.Sub(prev)) * float64(frac) / 65536))
			if got := next(mid); !got.Equal(n) {
				t.Fatalf("%q: Next(%v) = %v, but the chain from %v goes on to %v", spec, mid, got, prev, n)
			}
			prev = n
		}
	})
}
