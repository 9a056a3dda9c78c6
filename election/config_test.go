package election_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
)

func TestConfig_Validate(t *testing.T) {
	b := memory.New(election.Timing{}).Candidate()
	for _, tc := range []struct {
		name string
		cfg  election.Config
		want []string
	}{
		{"valid", election.Config{Backend: b, Identity: election.Identity{ID: "n1"}}, nil},
		{"empty identity", election.Config{Backend: b}, []string{`Identity.ID "": required`}},
		{"no backend", election.Config{Identity: election.Identity{ID: "n1"}}, []string{"Backend: required"}},
		{"negative durations", election.Config{Backend: b, Identity: election.Identity{ID: "n1"}, RetryPeriod: -time.Second, ReleaseTimeout: -time.Second},
			[]string{"RetryPeriod -1s", "ReleaseTimeout -1s"}},
		{"negative hold cooldown", election.Config{Backend: b, Identity: election.Identity{ID: "n1"}, HoldCooldown: -time.Second},
			[]string{"HoldCooldown -1s: must not be negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := election.New(tc.cfg)
			envtest.WantErrors(t, err, tc.want)
		})
	}
}

func TestTiming_Validate(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    election.Timing
		min  time.Duration
		gran time.Duration
		want []string
	}{
		{"defaults", election.Timing{}.WithDefaults(5 * time.Second), 2 * time.Second, time.Second, nil},
		{"below backend minimum", election.Timing{TTL: time.Second}.WithDefaults(0), 2 * time.Second, time.Second, []string{"TTL 1s: below the backend minimum 2s"}},
		{"fractional TTL", election.Timing{TTL: 2500 * time.Millisecond}.WithDefaults(0), 2 * time.Second, time.Second, []string{"TTL 2.5s: must be a whole multiple of 1s"}},
		{"renew too slow", election.Timing{TTL: 6 * time.Second, RenewInterval: 3 * time.Second, SafetyMargin: time.Second}, time.Second, 0,
			[]string{"TTL 6s: must be greater than 2*RenewInterval (6s)"}},
		{"margin too wide", election.Timing{TTL: 6 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: 4 * time.Second}, time.Second, 0,
			[]string{"SafetyMargin 4s: must be less than TTL - RenewInterval (4s)"}},
		{"negative", election.Timing{TTL: 6 * time.Second, RenewInterval: -1, SafetyMargin: -1}, time.Second, 0,
			[]string{"RenewInterval -1ns: must be positive", "SafetyMargin -1ns: must be positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			envtest.WantErrors(t, tc.t.Validate(tc.min, tc.gran), tc.want)
		})
	}
}
