package backendtest

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
)

// CheckValidate is the property the backends' config fuzz targets check
// of Validate's answer err for a Config whose defaults applied give
// timing t. An error is "PKG: invalid config: " followed by one problem a
// line, each starting with the name of one of fields (then a space or a
// colon). No error means t holds what election.Timing promises: TTL at
// least minTTL (at most maxTTL if positive), RenewInterval and
// SafetyMargin positive, TTL > 2*RenewInterval and SafetyMargin < TTL -
// RenewInterval, computed without overflow.
func CheckValidate(tb testing.TB, pkg string, err error, fields []string, t election.Timing, minTTL, maxTTL time.Duration) {
	tb.Helper()
	if err != nil {
		msg, ok := strings.CutPrefix(err.Error(), pkg+": invalid config: ")
		if !ok {
			tb.Fatalf("%q: want the prefix %q", err, pkg+": invalid config: ")
		}
		for _, line := range strings.Split(msg, "\n") {
			named := false
			for _, f := range fields {
				if rest, ok := strings.CutPrefix(line, f); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, ":")) {
					named = true
					break
				}
			}
			if !named {
				tb.Fatalf("problem %q names none of the fields %v", line, fields)
			}
		}
		return
	}
	switch {
	case t.TTL < minTTL:
		tb.Fatalf("valid, with TTL %v below the minimum %v", t.TTL, minTTL)
	case maxTTL > 0 && t.TTL > maxTTL:
		tb.Fatalf("valid, with TTL %v above the maximum %v", t.TTL, maxTTL)
	case t.RenewInterval <= 0 || t.SafetyMargin <= 0:
		tb.Fatalf("valid, with RenewInterval %v and SafetyMargin %v", t.RenewInterval, t.SafetyMargin)
	case t.TTL-t.RenewInterval <= t.RenewInterval: // TTL > RenewInterval > 0: no overflow
		tb.Fatalf("valid, with TTL %v not above 2*RenewInterval (RenewInterval %v)", t.TTL, t.RenewInterval)
	case t.SafetyMargin >= t.TTL-t.RenewInterval:
		tb.Fatalf("valid, with SafetyMargin %v not below TTL %v - RenewInterval %v", t.SafetyMargin, t.TTL, t.RenewInterval)
	}
}
