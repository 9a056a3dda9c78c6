package consul_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
)

func TestConfig_Validate(t *testing.T) {
	client, err := api.NewClient(api.DefaultConfig()) // never dialed
	if err != nil {
		t.Fatal(err)
	}
	ok := consul.Config{Client: client, Key: "service/baton/x/.lock"}
	tests := []struct {
		name string
		mod  func(*consul.Config)
		want []string // substrings of the error; none means valid
	}{
		{"defaults", func(c *consul.Config) {}, nil},
		{"explicit", func(c *consul.Config) {
			c.Timing = election.Timing{TTL: 15 * time.Second, RenewInterval: 5 * time.Second, SafetyMargin: 3 * time.Second}
			c.LockDelay, c.WaitTime, c.SessionName, c.History = 15*time.Second, time.Second, "reports", 50
		}, nil},
		{"all missing", func(c *consul.Config) { *c = consul.Config{} }, []string{"Client <nil>: required", `Key "": required`}},
		{"slashes", func(c *consul.Config) { c.Key = "/a/" }, []string{`Key "/a/": must not begin or end with a slash`}},
		{"trailing slash", func(c *consul.Config) { c.Key = "a/" }, []string{`Key "a/"`}},
		{"TTL below server minimum", func(c *consul.Config) { c.Timing.TTL = 5 * time.Second }, []string{"TTL 5s: below the backend minimum 10s"}},
		{"TTL above server maximum", func(c *consul.Config) { c.Timing.TTL = 25 * time.Hour }, []string{"TTL 25h0m0s: above the server maximum"}},
		{"renew too slow", func(c *consul.Config) { c.Timing.RenewInterval = 6 * time.Second }, []string{"must be greater than 2*RenewInterval"}},
		{"margin too large", func(c *consul.Config) { c.Timing.SafetyMargin = 8 * time.Second }, []string{"SafetyMargin 8s: must be less than TTL - RenewInterval"}},
		{"negative durations", func(c *consul.Config) {
			c.Timing.RenewInterval, c.Timing.SafetyMargin, c.WaitTime, c.LockDelay, c.History = -1, -1, -1, -1, -1
		}, []string{"RenewInterval -1ns: must be positive", "SafetyMargin -1ns: must be positive",
			"WaitTime -1ns: must be positive", "LockDelay -1ns: must be at least 1ms", "History -1: must be positive"}},
		{"lock delay below 1ms", func(c *consul.Config) { c.LockDelay = time.Microsecond }, []string{"LockDelay 1µs: must be at least 1ms"}},
		{"lock delay above max", func(c *consul.Config) { c.LockDelay = 2 * time.Minute }, []string{"LockDelay 2m0s: above the server maximum 1m0s"}},
		// The leader's window at the defaults is TTL 10s - SafetyMargin 2s
		// = 8s; MinLockDelay is 8.8s.
		{"lock delay 1ms, the old default", func(c *consul.Config) { c.LockDelay = time.Millisecond },
			[]string{"LockDelay 1ms: below MinLockDelay 8.8s (TTL 10s - SafetyMargin 2s, plus a tenth)", "leave it zero (the TTL)"}},
		{"lock delay shorter than the window", func(c *consul.Config) { c.LockDelay = 8 * time.Second },
			[]string{"LockDelay 8s: below MinLockDelay 8.8s"}},
		{"lock delay at the minimum", func(c *consul.Config) { c.LockDelay = 8800 * time.Millisecond }, nil},
		{"lock delay with a fraction of a millisecond", func(c *consul.Config) { c.LockDelay = 8800*time.Millisecond + 999*time.Microsecond }, nil},
		{"lock delay a nanosecond short", func(c *consul.Config) { c.LockDelay = 8800*time.Millisecond - 1 },
			[]string{"LockDelay 8.799999999s: below MinLockDelay 8.8s"}},
		{"shorter window, shorter lock delay", func(c *consul.Config) {
			c.Timing = election.Timing{RenewInterval: time.Second, SafetyMargin: 7 * time.Second}
			c.LockDelay = 3300 * time.Millisecond
		}, nil},
		{"shorter window, lock delay too short", func(c *consul.Config) {
			c.Timing = election.Timing{RenewInterval: time.Second, SafetyMargin: 7 * time.Second}
			c.LockDelay = 3 * time.Second
		}, []string{"LockDelay 3s: below MinLockDelay 3.3s (TTL 10s - SafetyMargin 7s, plus a tenth)"}},
		{"long TTL, default lock delay capped below the window", func(c *consul.Config) { c.Timing.TTL = 70 * time.Second },
			[]string{"LockDelay 1m0s: below MinLockDelay 1m1.6s (TTL 1m10s - SafetyMargin 14s, plus a tenth)",
				"that is above the server maximum 1m0s: shorten the window with a smaller TTL or a larger SafetyMargin"}},
		{"long TTL, window shortened", func(c *consul.Config) { c.Timing.TTL, c.Timing.SafetyMargin = 70*time.Second, 20*time.Second }, nil},
		{"long TTL, lock delay above max and below the window", func(c *consul.Config) { c.Timing.TTL, c.LockDelay = 90*time.Second, 65*time.Second },
			[]string{"LockDelay 1m5s: above the server maximum 1m0s", "LockDelay 1m5s: below MinLockDelay 1m19.2s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			before := c
			err := c.Validate()
			if c != before {
				t.Error("Validate modified the config")
			}
			envtest.WantErrors(t, err, tt.want)
			if len(tt.want) == 0 {
				if _, err := consul.New(c); err != nil {
					t.Fatalf("New() = %v", err)
				}
				return
			}
			if !strings.HasPrefix(err.Error(), "consul: invalid config: ") {
				t.Errorf("Validate() = %q, want prefix %q", err, "consul: invalid config: ")
			}
			if _, nerr := consul.New(c); nerr == nil {
				t.Error("New() accepted an invalid config")
			}
		})
	}
}

func TestMinLockDelay(t *testing.T) {
	for _, tt := range []struct {
		timing election.Timing
		want   time.Duration
	}{
		{election.Timing{}, 8800 * time.Millisecond}, // 10s - 2s, plus a tenth
		{election.Timing{TTL: 30 * time.Second}, 26400 * time.Millisecond},
		{election.Timing{RenewInterval: time.Second, SafetyMargin: 7 * time.Second}, 3300 * time.Millisecond},
		{election.Timing{SafetyMargin: 2*time.Second + time.Nanosecond}, 8800 * time.Millisecond}, // rounded up to a millisecond
	} {
		if got := consul.MinLockDelay(tt.timing); got != tt.want {
			t.Errorf("MinLockDelay(%+v) = %v, want %v", tt.timing, got, tt.want)
		}
	}
}
