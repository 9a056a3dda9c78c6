package consul

import (
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// FuzzConfig: Validate never panics, names a field in every problem, and
// what it accepts has a sane timing between MinTTL and MaxTTL
// (backendtest.CheckValidate), a Key without a slash at either end, a
// LockDelay between MinLockDelay and MaxLockDelay in whole milliseconds'
// terms, and a WaitTime that is not negative.
func FuzzConfig(f *testing.F) {
	f.Add(true, "service/baton/reports/.lock", int64(0), int64(0), int64(0), int64(0), int64(0), 0)
	f.Add(true, "k", int64(10e9), int64(1e9), int64(7e9), int64(3300e6), int64(-1), 5)
	f.Add(false, "/k/", int64(30e9), int64(0), int64(0), int64(61e9), int64(2e9), -1)
	f.Add(true, "k", int64(24*3600e9), int64(0), int64(0), int64(0), int64(0), 0)
	f.Fuzz(func(t *testing.T, client bool, key string, ttl, renew, margin, lockDelay, wait int64, history int) {
		c := Config{Key: key, History: history, LockDelay: time.Duration(lockDelay), WaitTime: time.Duration(wait),
			Timing: election.Timing{TTL: time.Duration(ttl), RenewInterval: time.Duration(renew), SafetyMargin: time.Duration(margin)}}
		if client {
			c.Client = new(api.Client)
		}
		r, err := c.resolved()
		if verr := c.Validate(); (verr == nil) != (err == nil) {
			t.Fatalf("Validate %v, resolved %v", verr, err)
		}
		backendtest.CheckValidate(t, "consul", err, []string{"Client", "TTL", "RenewInterval", "SafetyMargin", "History", "Key", "LockDelay", "WaitTime"},
			r.Timing, MinTTL, MaxTTL)
		if err != nil {
			return
		}
		if r.Client == nil || r.Key == "" || r.Key[0] == '/' || r.Key[len(r.Key)-1] == '/' || r.WaitTime < 0 || r.History < 0 ||
			r.LockDelay > MaxLockDelay || r.LockDelay.Truncate(time.Millisecond) < MinLockDelay(r.Timing) || MinLockDelay(r.Timing) <= 0 {
			t.Fatalf("valid: %+v (MinLockDelay %v)", r, MinLockDelay(r.Timing))
		}
	})
}
