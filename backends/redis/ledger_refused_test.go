package redis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/ledger"
)

// A claim and a finish the server refuses for want of a permission (the
// user's ACL narrowed while its term leads) are marked ledger.ErrRefused.
func TestLedger_ACLNarrowedIsRefused(t *testing.T) {
	s := redistest.Start(t)
	e := "narrowed"
	setUser(t, s.Addr(), "baton", "s3cret", redis.ACLRules(e))
	cfg := redis.Config{Addr: s.Addr(), Username: "baton", Password: "s3cret", Election: e, Timing: election.Timing{TTL: 3 * time.Second}}
	b := newBackend(t, cfg)
	l := backendtest.Acquire(t, b, "a", acquireWithin)
	defer backendtest.Release(t, l)
	led := b.Ledger()
	tick := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	if err := led.Claim(ctxT(t, 5*time.Second), []ledger.Claim{{Job: "j", Tick: tick, Token: l.Token(), Instance: "a", Started: tick}})[0]; err != nil {
		t.Fatalf("claim with the documented ACL: %v", err)
	}
	// The scripts' writes taken away (ACL SETUSER resets the user's rules
	// and keeps its connections).
	rules := redis.ACLRules(e)
	for _, cmd := range []string{"hset", "lpush", "lset", "ltrim", "rpush", "set"} {
		rules = strings.Replace(rules, " +"+cmd, "", 1)
	}
	setUser(t, s.Addr(), "baton", "s3cret", rules)
	err := led.Claim(ctxT(t, 5*time.Second), []ledger.Claim{{Job: "j", Tick: tick.Add(time.Second), Token: l.Token(), Instance: "a", Started: tick}})[0]
	if !errors.Is(err, ledger.ErrRefused) {
		t.Errorf("claim without the scripts' writes: %v, want ErrRefused", err)
	}
	err = led.Finish(ctxT(t, 5*time.Second), []ledger.Run{{Job: "j", Tick: tick, Token: l.Token(), Instance: "a", Started: tick, Ended: tick, Result: ledger.ResultOK}})[0]
	if !errors.Is(err, ledger.ErrRefused) {
		t.Errorf("finish without LSET: %v, want ErrRefused", err)
	}
}
