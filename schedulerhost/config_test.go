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
			err := checkNew(t, tc.cfg, tc.want)
			if err == nil {
				return
			}
			if _, ok := errors.AsType[*schedulerhost.ConfigError](err); !ok || !strings.HasPrefix(err.Error(), "schedulerhost: invalid config: ") {
				t.Errorf("error %q (%T): want a *ConfigError that says invalid config", err, err)
			}
		})
	}
}

// checkNew calls New with cfg and fails t unless, for want nil, it returns
// no error, or else an error that contains each of want; it returns the
// error.
func checkNew(t *testing.T, cfg schedulerhost.Config, want []string) error {
	t.Helper()
	_, err := schedulerhost.New(cfg)
	if want == nil {
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return nil
	}
	if err == nil {
		t.Fatalf("New: no error, want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	return err
}

func TestConfig_RetriesAndJitter(t *testing.T) {
	run := func(context.Context) error { return nil }
	job := func(mod func(*schedulerhost.Job)) schedulerhost.Config {
		j := schedulerhost.Job{Name: "x", Schedule: "*/10 * * * * *", Run: run}
		mod(&j)
		return schedulerhost.Config{Jobs: []schedulerhost.Job{j}}
	}
	for _, tc := range []struct {
		name string
		cfg  schedulerhost.Config
		want []string // substrings of the error; nil means valid
	}{
		{"valid", job(func(j *schedulerhost.Job) {
			j.Retries, j.RetryBackoff, j.RetryBackoffMax, j.Jitter = 3, 2*time.Second, 30*time.Second, 9*time.Second
		}), nil},
		{"backoff longer than the default cap", job(func(j *schedulerhost.Job) { j.Retries, j.RetryBackoff = 1, 5*time.Minute }), nil},
		{"negative retries", job(func(j *schedulerhost.Job) { j.Retries = -1 }), []string{`job "x": Retries -1: want 0 to 100`}},
		{"too many retries", job(func(j *schedulerhost.Job) { j.Retries = 101 }), []string{`job "x": Retries 101`}},
		{"negative backoffs", job(func(j *schedulerhost.Job) { j.RetryBackoff, j.RetryBackoffMax = -time.Second, -time.Minute }),
			[]string{`job "x": RetryBackoff -1s: must not be negative`, `job "x": RetryBackoffMax -1m0s: must not be negative`}},
		{"backoff above its cap", job(func(j *schedulerhost.Job) { j.RetryBackoff, j.RetryBackoffMax = time.Minute, time.Second }),
			[]string{`job "x": RetryBackoff 1m0s: more than RetryBackoffMax 1s`}},
		{"negative jitter", job(func(j *schedulerhost.Job) { j.Jitter = -time.Second }), []string{`job "x": Jitter -1s: must not be negative`}},
		{"jitter of a whole cron period", job(func(j *schedulerhost.Job) { j.Jitter = 10 * time.Second }),
			[]string{`job "x": Jitter 10s: must be shorter than the shortest gap between the schedule's ticks (10s)`}},
		{"jitter of an irregular cron's shortest gap", job(func(j *schedulerhost.Job) { j.Schedule, j.Jitter = "0 0 9,10 * * *", time.Hour }),
			[]string{`job "x": Jitter 1h0m0s: must be shorter than the shortest gap between the schedule's ticks (1h0m0s)`}},
		{"jitter of an @every period", job(func(j *schedulerhost.Job) { j.Schedule, j.Jitter = "@every 1m", 2*time.Minute }),
			[]string{`job "x": Jitter 2m0s: must be shorter than the shortest gap between the schedule's ticks (1m0s)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkNew(t, tc.cfg, tc.want)
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
