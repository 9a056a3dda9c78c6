package schedulerhost_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/schedulerhost"
)

// TestEverySchedule_SameTicksFromAnyStart: two parsers of the same spec,
// asked from different instants (as two leaders, or one before and one
// after a restart, would), compute the same chain of ticks: the whole
// multiples of the interval since the epoch, plus the offset.
func TestEverySchedule_SameTicksFromAnyStart(t *testing.T) {
	base := time.Date(2026, 12, 6, 1, 51, 5, 300_000_000, time.UTC)
	for _, tc := range []struct {
		spec          string
		every, offset time.Duration
	}{
		{"@every 30s", 30 * time.Second, 0},
		{"@every 7s", 7 * time.Second, 0},
		{"@every 6s", 6 * time.Second, 0},
		{"@every 2h offset 15m", 2 * time.Hour, 15 * time.Minute},
		{"@every 1h30m offset 1h29m59s", 90 * time.Minute, 89*time.Minute + 59*time.Second},
		{"@every 168h offset 79h", 168 * time.Hour, 79 * time.Hour},
	} {
		a, err := schedulerhost.ParseSchedule(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		b, err := schedulerhost.ParseSchedule(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := a.(schedulerhost.EverySchedule); !ok || e.Every != tc.every || e.Offset != tc.offset {
			t.Errorf("%q: parsed as %#v, want EverySchedule{%v, %v}", tc.spec, a, tc.every, tc.offset)
		}
		chain := func(s interface{ Next(time.Time) time.Time }, from time.Time, n int) []time.Time {
			var ticks []time.Time
			for tk := from; len(ticks) < n; {
				tk = s.Next(tk)
				ticks = append(ticks, tk)
			}
			return ticks
		}
		// a from base, b from 17.9 s later, in another zone.
		ca := chain(a, base, 40)
		cb := chain(b, base.Add(17*time.Second+900*time.Millisecond).In(mustZone(t, newYork)), 20)
		i := 0
		for i < len(ca) && !ca[i].After(base.Add(17*time.Second+900*time.Millisecond)) {
			i++
		}
		for k, tk := range cb {
			if !tk.Equal(ca[i+k]) {
				t.Fatalf("%q: tick %d from the later start is %v, from the earlier %v", tc.spec, k, tk, ca[i+k])
			}
		}
		for _, tk := range ca {
			if since := tk.Sub(time.Unix(0, 0)) - tc.offset; since%tc.every != 0 {
				t.Fatalf("%q: tick %v is %v after the epoch, less the offset: not a whole multiple of %v", tc.spec, tk, since, tc.every)
			}
		}
	}
}

// TestEverySchedule_Next pins Next at and around ticks, in other zones and
// before the epoch.
func TestEverySchedule_Next(t *testing.T) {
	paris := mustZone(t, "Europe/Paris")
	for _, tc := range []struct {
		spec     string
		from     time.Time
		want     time.Time
		wantZone *time.Location
	}{
		// The demo's term that began at 01:51:05: the next tick is :30,
		// whoever leads, not the term's start + 30 s.
		{"@every 30s", time.Date(2026, 12, 6, 1, 51, 5, 0, time.UTC), time.Date(2026, 12, 6, 1, 51, 30, 0, time.UTC), time.UTC},
		// Strictly after: from a tick, the next one.
		{"@every 30s", time.Date(2026, 12, 6, 1, 51, 30, 0, time.UTC), time.Date(2026, 12, 6, 1, 52, 0, 0, time.UTC), time.UTC},
		{"@every 30s", time.Date(2026, 12, 6, 1, 51, 29, 999_999_999, time.UTC), time.Date(2026, 12, 6, 1, 51, 30, 0, time.UTC), time.UTC},
		{"@every 2h offset 15m", time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC), time.Date(2026, 12, 6, 2, 15, 0, 0, time.UTC), time.UTC},
		{"@every 2h offset 15m", time.Date(2026, 12, 6, 2, 15, 0, 0, time.UTC), time.Date(2026, 12, 6, 4, 15, 0, 0, time.UTC), time.UTC},
		// Elapsed time whatever the zone: across Paris's spring-forward
		// the ticks stay an hour apart, in the caller's zone.
		{"@every 1h", time.Date(2027, 3, 28, 1, 30, 0, 0, time.UTC).In(paris), time.Date(2027, 3, 28, 2, 0, 0, 0, time.UTC), paris},
		{"@every 24h offset 1h", time.Date(2027, 3, 28, 0, 30, 0, 0, time.UTC).In(paris), time.Date(2027, 3, 28, 1, 0, 0, 0, time.UTC), paris},
		// Before the epoch: still whole multiples (floor, not truncation).
		{"@every 7s", time.Unix(0, -1), time.Unix(0, 0), time.Local},
		{"@every 7s", time.Unix(-8, 0), time.Unix(-7, 0), time.Local},
		{"@every 7s offset 3s", time.Unix(-5, 0), time.Unix(-4, 0), time.Local},
	} {
		s, err := schedulerhost.ParseSchedule(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Next(tc.from)
		if !got.Equal(tc.want) || got.Location() != tc.wantZone {
			t.Errorf("%q: Next(%v) = %v, want %v", tc.spec, tc.from, got, tc.want.In(tc.wantZone))
		}
	}
}

// TestParseSchedule_EveryErrors: a bad interval or offset is refused with
// the part and its value named, by ParseSchedule and by Validate.
func TestParseSchedule_EveryErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"@every 0s", `@every interval "0s": must be positive`},
		{"@every -5m", `@every interval "-5m": must be positive`},
		{"@every 1500ms", `@every interval "1500ms": must be a whole number of seconds`},
		{"@every 500ms", `@every interval "500ms": must be a whole number of seconds`},
		{"@every soon", `@every interval "soon": not a duration such as 90s, 15m or 2h`},
		{"@every 2h offset 2h", `@every offset "2h": must be shorter than the interval (2h0m0s)`},
		{"@every 2h offset 3h", `@every offset "3h": must be shorter than the interval (2h0m0s)`},
		{"@every 1h offset -1m", `@every offset "-1m": must not be negative`},
		{"@every 1m offset 0.5s", `@every offset "0.5s": must be a whole number of seconds`},
		{"@every 1m offset later", `@every offset "later": not a duration such as 90s, 15m or 2h`},
		{"@every", `want "@every INTERVAL" or "@every INTERVAL offset OFFSET" (such as "@every 2h offset 15m"), got "@every"`},
		{"@every 1h offset", `want "@every INTERVAL" or "@every INTERVAL offset OFFSET" (such as "@every 2h offset 15m"), got "@every 1h offset"`},
		{"@every 1h plus 5m", `want "@every INTERVAL" or "@every INTERVAL offset OFFSET" (such as "@every 2h offset 15m"), got "@every 1h plus 5m"`},
		{"@every 1h 5m", `want "@every INTERVAL" or "@every INTERVAL offset OFFSET" (such as "@every 2h offset 15m"), got "@every 1h 5m"`},
		{"CRON_TZ=Europe/Paris @every 1h", `zone "CRON_TZ=Europe/Paris": not allowed with @every`},
	} {
		_, err := schedulerhost.ParseSchedule(tc.spec)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseSchedule(%q) = %v, want %s", tc.spec, err, tc.want)
		}
	}
	cfg := schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "x", Schedule: "@every 1h offset 90m", Run: nop}}}
	err := cfg.Validate()
	var ce *schedulerhost.ConfigError
	const want = `job "x": Schedule "@every 1h offset 90m": @every offset "90m": must be shorter than the interval (1h0m0s)`
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate = %v, want a ConfigError with %s", err, want)
	}
	// Spaces around the words do not matter; whole seconds in any unit do.
	for _, spec := range []string{"@every  2h   offset  15m", "@every 1m0s", "@every 2000ms", "@every 1s offset 0s"} {
		if _, err := schedulerhost.ParseSchedule(spec); err != nil {
			t.Errorf("ParseSchedule(%q): %v", spec, err)
		}
	}
}
