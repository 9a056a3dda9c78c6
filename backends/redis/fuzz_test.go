package redis

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// FuzzConfig: Validate never panics, names a field in every problem, and
// what it accepts has a sane timing in whole milliseconds
// (backendtest.CheckValidate), an Addr, an Election name that keeps its
// keys in one hash slot, a MaxBatch in range, a DialTimeout that is not
// negative, and no Username without a Password.
func FuzzConfig(f *testing.F) {
	f.Add("127.0.0.1:6379", "reports", "", "", int64(0), int64(0), int64(0), 0, 0, int64(0))
	f.Add("h:1", "a{b}", "u", "", int64(1500e6), int64(1), int64(-1), -1, 5001, int64(-1))
	f.Add("", "x/y:z.w-v_1", "u", "p", int64(1e9+1), int64(0), int64(0), 20, 1, int64(1))
	f.Fuzz(func(t *testing.T, addr, elect, user, pass string, ttl, renew, margin int64, history, maxBatch int, dial int64) {
		c := Config{Addr: addr, Election: elect, Username: user, Password: pass, History: history, MaxBatch: maxBatch,
			DialTimeout: time.Duration(dial),
			Timing:      election.Timing{TTL: time.Duration(ttl), RenewInterval: time.Duration(renew), SafetyMargin: time.Duration(margin)}}
		r, err := c.resolved()
		if verr := c.Validate(); (verr == nil) != (err == nil) {
			t.Fatalf("Validate %v, resolved %v", verr, err)
		}
		backendtest.CheckValidate(t, "redis", err, []string{"Addr", "TTL", "RenewInterval", "SafetyMargin", "History", "Election", "MaxBatch", "DialTimeout", "Password", "WaitTimeout", "WaitReplicas", "SentinelAddrs", "MasterName", "ClusterAddrs"},
			r.Timing, MinTTL, 0)
		if err != nil {
			return
		}
		if r.Addr == "" || !electionName.MatchString(r.Election) || r.MaxBatch < 1 || r.MaxBatch > MaxMaxBatch || r.DialTimeout < 0 ||
			r.History < 0 || r.Timing.TTL%time.Millisecond != 0 || (r.Username != "" && r.Password == "") {
			t.Fatalf("valid: %+v", r)
		}
		for _, ch := range r.Election {
			if ch == '{' || ch == '}' || ch == '*' || ch == '?' || ch == '[' {
				t.Fatalf("valid election %q: moves the hash tag or globs", r.Election)
			}
		}
	})
}
