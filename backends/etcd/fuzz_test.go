package etcd

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
)

// FuzzConfig: Validate never panics, names a field in every problem, and
// what it accepts has a sane timing (backendtest.CheckValidate), whole
// seconds of TTL, room for one claim per transaction, and a Prefix that
// is set, does not end with a slash and has no "-ledger" segment.
func FuzzConfig(f *testing.F) {
	f.Add(true, "/baton/elections/reports", int64(0), int64(0), int64(0), 0, 0)
	f.Add(true, "/baton/elections/reports/eu", int64(5e9), int64(1e9), int64(5e8), 20, 128)
	f.Add(false, "/a-ledger/b", int64(1500e6), int64(-1), int64(0), -1, 4)
	f.Add(true, "/x/", int64(1<<62), int64(1<<61), int64(1<<60), 1, 5)
	// TTL 9223372036s, RenewInterval above half of it: 2*RenewInterval overflows.
	f.Add(true, "/o", int64(9223372036e9), int64(4700000000e9), int64(1), 0, 0)
	f.Fuzz(func(t *testing.T, client bool, prefix string, ttl, renew, margin int64, history, maxTxnOps int) {
		c := Config{Prefix: prefix, History: history, MaxTxnOps: maxTxnOps,
			Timing: election.Timing{TTL: time.Duration(ttl), RenewInterval: time.Duration(renew), SafetyMargin: time.Duration(margin)}}
		if client {
			c.Client = new(clientv3.Client)
		}
		r, err := c.resolved()
		if verr := c.Validate(); (verr == nil) != (err == nil) {
			t.Fatalf("Validate %v, resolved %v", verr, err)
		}
		backendtest.CheckValidate(t, "etcd", err, []string{"Client", "TTL", "RenewInterval", "SafetyMargin", "History", "MaxTxnOps", "Prefix"},
			r.Timing, MinTTL, 0)
		if err == nil && (r.Client == nil || r.Timing.TTL%time.Second != 0 || r.MaxTxnOps < minTxnOps || r.History < 0 ||
			r.Prefix == "" || r.Prefix[len(r.Prefix)-1] == '/' || notInLedger(r.Prefix) != nil) {
			t.Fatalf("valid: %+v", r)
		}
	})
}
