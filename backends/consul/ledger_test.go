package consul_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/driver"
	"github.com/batonhq/baton/ledger"
)

// The claims, history and Finish rules common to every ledger are checked
// by TestBackend/Ledger (backendtest.RunLedger); what follows is Consul's own.

// TestLedger_FinishWithAnotherToken: a Finish with another term's token
// leaves the entry alone and is not an error.
func TestLedger_FinishWithAnotherToken(t *testing.T) {
	a := sharedAgent(t)
	c := newCandidate(t, a, newKey(t))
	lg := c.Ledger()
	ctx := context.Background()
	l := backendtest.Acquire(t, c, "a", 30*time.Second)
	defer backendtest.Release(t, l)

	base := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	job := "mail/daily report" // escaped in the key
	if err := lg.Claim(ctx, []ledger.Claim{{Job: job, Tick: base, Token: l.Token(), Instance: "a", Started: time.Now()}})[0]; err != nil {
		t.Fatalf("Claim: %v", err)
	}
	h, err := lg.History(ctx, job, 10)
	if err != nil || len(h) != 1 {
		t.Fatalf("History = %+v, %v; want one entry", h, err)
	}
	fin := h[0]
	fin.Result, fin.Ended = ledger.ResultOK, time.Now().UTC()
	if err := lg.Finish(ctx, []ledger.Run{fin})[0]; err != nil {
		t.Fatalf("Finish: %v", err)
	}
	other := fin
	other.Token, other.Result = l.Token()+1, ledger.ResultFailed
	if err := lg.Finish(ctx, []ledger.Run{other})[0]; err != nil {
		t.Fatalf("Finish with another token: %v", err)
	}
	if h, _ := lg.History(ctx, job, 1); len(h) != 1 || h[0].Result != ledger.ResultOK {
		t.Errorf("History after Finish = %+v, want result ok", h)
	}
}

// TestLedger_StaleTerm checks that a term that no longer holds the lock
// cannot claim: after a handover (the old token), and when Consul
// destroyed the session behind a term that has not noticed yet, in which
// case the Host ends that term on the refusal (loseOnStale).
func TestLedger_StaleTerm(t *testing.T) {
	a := sharedAgent(t)
	key := newKey(t)
	ca, cb := newCandidate(t, a, key), newCandidate(t, a, key)
	ctx := context.Background()
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	la := backendtest.Acquire(t, ca, "a", 30*time.Second)
	backendtest.Release(t, la)
	lb := backendtest.Acquire(t, cb, "b", 30*time.Second)
	err := ca.Ledger().Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick, Token: la.Token(), Instance: "a"}})[0]
	if !errors.Is(err, ledger.ErrStaleTerm) || !errors.Is(err, election.ErrLeadershipLost) {
		t.Errorf("Claim with a released term's token: %v, want ErrStaleTerm", err)
	}
	// b's Backend can claim with b's token, and so can a's Backend
	// (another process's view), finding the term through the lock key.
	if err := ca.Ledger().Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick, Token: lb.Token(), Instance: "b"}})[0]; err != nil {
		t.Errorf("Claim with the live token through another Backend: %v", err)
	}

	// Destroy b's session behind its back (its watch hears of it only
	// after the proxy's delay): the claim must fail, and the term end.
	info, err := cb.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pair, _, err := mustClient(t).KV().Get(key, nil)
	if err != nil || pair == nil {
		t.Fatalf("read lock key: %v", err)
	}
	cb.proxy.SetDelay(500 * time.Millisecond)
	if _, err := mustClient(t).Session().Destroy(pair.Session, nil); err != nil {
		t.Fatal(err)
	}
	cb.proxy.Heal()
	err = cb.Ledger().Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick.Add(time.Minute), Token: info.Token, Instance: "b"}})[0]
	if !errors.Is(err, ledger.ErrStaleTerm) {
		t.Errorf("Claim after the session was destroyed: %v, want ErrStaleTerm", err)
	}
	loseOnStale(lb, err)
	select {
	case <-lb.Done():
		if !errors.Is(lb.Err(), election.ErrLeadershipLost) {
			t.Errorf("b's Err() = %v, want ErrLeadershipLost", lb.Err())
		}
	case <-time.After(5 * time.Second):
		t.Error("b's term still open 5s after a stale claim")
	}
	backendtest.Release(t, lb)
	if last, err := cb.Ledger().LastClaimed(ctx, []string{"j"}); err != nil || !last[0].Equal(tick) {
		t.Errorf("LastClaimed = %v, %v; want %v (the stale claim must not count)", last, err, tick)
	}
}

func mustClient(t *testing.T) *api.Client {
	t.Helper()
	c, err := sharedAgent(t).Client("")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// loseOnStale does what the Host does with a claim refused as stale: it
// ends the term at once (election.Term.Lose, through driver.Loser).
func loseOnStale(l election.Lease, err error) {
	if errors.Is(err, ledger.ErrStaleTerm) {
		l.(driver.Loser).Lose(err)
	}
}
