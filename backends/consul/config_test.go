package consul_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/election"
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
		{"TTL below server minimum", func(c *consul.Config) { c.TTL = 5 * time.Second }, []string{"TTL 5s: below the backend minimum 10s"}},
		{"TTL above server maximum", func(c *consul.Config) { c.TTL = 25 * time.Hour }, []string{"TTL 25h0m0s: above the server maximum"}},
		{"renew too slow", func(c *consul.Config) { c.RenewInterval = 6 * time.Second }, []string{"must be greater than 2*RenewInterval"}},
		{"margin too large", func(c *consul.Config) { c.SafetyMargin = 8 * time.Second }, []string{"SafetyMargin 8s: must be less than TTL - RenewInterval"}},
		{"negative durations", func(c *consul.Config) {
			c.RenewInterval, c.SafetyMargin, c.WaitTime, c.LockDelay, c.History = -1, -1, -1, -1, -1
		}, []string{"RenewInterval -1ns: must be positive", "SafetyMargin -1ns: must be positive",
			"WaitTime -1ns: must be positive", "LockDelay -1ns: must be at least 1ms", "History -1: must be positive"}},
		{"lock delay below 1ms", func(c *consul.Config) { c.LockDelay = time.Microsecond }, []string{"LockDelay 1µs: must be at least 1ms"}},
		{"lock delay above max", func(c *consul.Config) { c.LockDelay = 2 * time.Minute }, []string{"LockDelay 2m0s: above the server maximum 1m0s"}},
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
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if _, err := consul.New(c); err != nil {
					t.Fatalf("New() = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v\nwant it to contain %q", err, w)
				}
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
