package driver_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
)

var testLimits = driver.BackendLimits{
	Client:         "Client",
	DefaultTTL:     10 * time.Second,
	MinTTL:         2 * time.Second,
	MaxTTL:         time.Minute,
	TTLUnit:        time.Second,
	DefaultHistory: 20,
}

func TestBackendLimits_Defaults(t *testing.T) {
	tm, history, logger := testLimits.Defaults(election.Timing{}, 0, nil)
	if tm.TTL != 10*time.Second || tm.RenewInterval != tm.TTL/3 || tm.SafetyMargin != 2*time.Second {
		t.Errorf("Timing = %+v, want TTL 10s, RenewInterval TTL/3, SafetyMargin 2s", tm)
	}
	if history != 20 {
		t.Errorf("History = %d, want 20", history)
	}
	if logger != slog.Default() {
		t.Errorf("Logger = %v, want slog.Default()", logger)
	}
	own := slog.New(slog.DiscardHandler)
	tm, history, logger = testLimits.Defaults(election.Timing{TTL: 4 * time.Second}, 3, own)
	if tm.TTL != 4*time.Second || history != 3 || logger != own {
		t.Errorf("Defaults replaced set values: TTL %v, History %d, Logger %v", tm.TTL, history, logger)
	}
}

func TestBackendLimits_Problems(t *testing.T) {
	valid := election.Timing{TTL: 10 * time.Second}.WithDefaults(0)
	for _, tc := range []struct {
		name      string
		hasClient bool
		timing    election.Timing
		history   int
		want      []string
	}{
		{"valid", true, valid, 20, nil},
		{"no client", false, valid, 20, []string{"Client <nil>: required"}},
		{"ttl below minimum", true, election.Timing{TTL: time.Second}.WithDefaults(0), 20, []string{"TTL 1s: below the backend minimum 2s"}},
		{"ttl not whole seconds", true, election.Timing{TTL: 2500 * time.Millisecond}.WithDefaults(0), 20, []string{"TTL 2.5s: must be a whole multiple of 1s"}},
		{"ttl above maximum", true, election.Timing{TTL: 2 * time.Minute}.WithDefaults(0), 20, []string{"TTL 2m0s: above the server maximum 1m0s"}},
		{"negative history", true, valid, -1, []string{"History -1: must be positive"}},
		{"everything at once", false, election.Timing{TTL: 1500 * time.Millisecond}.WithDefaults(0), -2,
			[]string{"Client <nil>", "TTL 1.5s: below the backend minimum 2s", "TTL 1.5s: must be a whole multiple of 1s", "History -2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := testLimits.Problems(tc.hasClient, tc.timing, tc.history)
			envtest.WantErrors(t, driver.InvalidConfig("test", errs), tc.want)
		})
	}
}

func TestInvalidConfig(t *testing.T) {
	if err := driver.InvalidConfig("test", nil); err != nil {
		t.Errorf("InvalidConfig with no problems = %v, want nil", err)
	}
	if err := driver.InvalidConfig("test", []error{nil}); err != nil {
		t.Errorf("InvalidConfig with only nil entries = %v, want nil", err)
	}
	limits := driver.BackendLimits{Client: "DB"}
	err := driver.InvalidConfig("test", limits.Problems(false, election.Timing{TTL: time.Second}.WithDefaults(0), 0))
	if err == nil || !strings.HasPrefix(err.Error(), "test: invalid config: DB <nil>: required") {
		t.Errorf("InvalidConfig = %v, want it to begin with %q", err, "test: invalid config: DB <nil>: required")
	}
}
