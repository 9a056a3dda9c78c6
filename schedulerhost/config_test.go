package schedulerhost_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/schedulerhost"
)

func TestConfig_Validate(t *testing.T) {
	run := func(context.Context) error { return nil }
	ok := schedulerhost.Job{Name: "a", Schedule: "*/5 * * * *", Run: run}
	for _, tc := range []struct {
		name string
		cfg  schedulerhost.Config
		want []string // substrings of the error; nil means valid
	}{
		{"valid", schedulerhost.Config{Jobs: []schedulerhost.Job{ok}}, nil},
		{"valid seconds, descriptor and zone", schedulerhost.Config{Jobs: []schedulerhost.Job{
			{Name: "s", Schedule: "*/10 * * * * *", Run: run},
			{Name: "d", Schedule: "@every 90s", Run: run},
			{Name: "z", Schedule: "CRON_TZ=Europe/Paris 0 3 * * *", Run: run},
		}}, nil},
		{"no jobs", schedulerhost.Config{}, []string{"Jobs: at least one"}},
		{"bad spec", schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "report", Schedule: "61 * * * *", Run: run}}},
			[]string{`job "report": Schedule "61 * * * *"`}},
		{"bad zone", schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "tz", Schedule: "CRON_TZ=Mars/Base 0 * * * *", Run: run}}},
			[]string{`job "tz": Schedule "CRON_TZ=Mars/Base 0 * * * *"`}},
		{"duplicate name", schedulerhost.Config{Jobs: []schedulerhost.Job{ok, ok}}, []string{`Name "a": duplicate of Jobs[0]`}},
		{"empty name", schedulerhost.Config{Jobs: []schedulerhost.Job{{Schedule: "* * * * *", Run: run}}}, []string{`Jobs[0].Name "": required`}},
		{"missing run", schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "x", Schedule: "* * * * *"}}}, []string{`job "x": Run: required`}},
		{"negative timeout", schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "x", Schedule: "* * * * *", Run: run, Timeout: -time.Second}}},
			[]string{`job "x": Timeout -1s`}},
		{"bad overlap", schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "x", Schedule: "* * * * *", Run: run, Overlap: "sometimes"}}},
			[]string{`Overlap "sometimes"`}},
		{"bad misfire", schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "x", Schedule: "* * * * *", Run: run, Misfire: "all"}}},
			[]string{`Misfire "all"`}},
		{"negative durations", schedulerhost.Config{Jobs: []schedulerhost.Job{ok}, ShutdownTimeout: -1, KillGrace: -2},
			[]string{"ShutdownTimeout -1ns", "KillGrace -2ns"}},
		{"ledger without instance", schedulerhost.Config{Jobs: []schedulerhost.Job{ok}, Ledger: staleLedger{}}, []string{`Instance "": required with a Ledger`}},
		{"every problem at once", schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "x", Schedule: "nope"}, {Name: "x", Schedule: "* * * * *", Run: run}}},
			[]string{`Schedule "nope"`, `job "x": Run: required`, `duplicate of Jobs[0]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schedulerhost.New(tc.cfg)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New: no error, want %q", tc.want)
			}
			if _, ok := errors.AsType[*schedulerhost.ConfigError](err); !ok || !strings.HasPrefix(err.Error(), "schedulerhost: invalid config: ") {
				t.Errorf("error %q (%T): want a *ConfigError that says invalid config", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestNew_DoesNotMutateCaller(t *testing.T) {
	jobs := []schedulerhost.Job{{Name: "a", Schedule: "* * * * *", Run: func(context.Context) error { return nil }}}
	cfg := schedulerhost.Config{Jobs: jobs}
	if _, err := schedulerhost.New(cfg); err != nil {
		t.Fatal(err)
	}
	if jobs[0].Overlap != "" || cfg.ShutdownTimeout != 0 {
		t.Errorf("New changed the caller's config: %+v", cfg)
	}
}

// A field whose list has an empty element (", * * * *") matched nothing,
// and Next then searched minute by minute for five years: 6.2 s under
// -race for the fuzz corpus entry 746a913c91e1baee. A spec that never
// fires ("0 2 30 2 *") was accepted silently. Both are errors now, naming
// the spec and why.
func TestParseSchedule_RefusesSpecsThatNeverFire(t *testing.T) {
	for spec, want := range map[string]string{
		", * * * *":                       `field 1 ",": empty element in a list`,
		"1,,2 * * * *":                    `field 1 "1,,2": empty element in a list`,
		"* * * * 1,":                      `field 5 "1,": empty element in a list`,
		"CRON_TZ=UTC 0 0 * * ,":           `field 5 ",": empty element in a list`,
		"0 2 30 2 *":                      "never fires",
		"CRON_TZ=Europe/Paris 0 0 31 4 *": "never fires",
	} {
		t0 := time.Now()
		_, err := schedulerhost.ParseSchedule(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSchedule(%q) = %v, want an error with %q", spec, err, want)
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("ParseSchedule(%q) took %v", spec, d)
		}
	}
	for _, spec := range []string{"0 0 29 2 *", "*/5 * * * * *", "@every 10s", "1,2 * * * *", "CRON_TZ=Asia/Tokyo 0 9 * * 1-5"} {
		if _, err := schedulerhost.ParseSchedule(spec); err != nil {
			t.Errorf("ParseSchedule(%q): %v", spec, err)
		}
	}
}
