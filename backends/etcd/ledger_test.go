package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/driver"
	"github.com/batonhq/baton/ledger"
)

var tick0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func claim(t *testing.T, lg ledger.Ledger, job string, tick time.Time, token uint64) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return lg.Claim(ctx, []ledger.Claim{{Job: job, Tick: tick, Token: token, Instance: "i1", Started: time.Now()}})[0]
}

// finish finishes r, in a batch of one.
func finish(t *testing.T, lg ledger.Ledger, r ledger.Run) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return lg.Finish(ctx, []ledger.Run{r})[0]
}

// leadLedger makes a Backend of the election pfx talking through cli and
// returns it, its term (acquired as "a", released when t ends) and its
// ledger.
func leadLedger(t *testing.T, cli *clientv3.Client, pfx string) (*etcd.Backend, election.Lease, ledger.Ledger) {
	t.Helper()
	b := newBackend(t, cli, pfx, 2*time.Second)
	l := backendtest.Acquire(t, b, "a", acquireWithin)
	t.Cleanup(func() { backendtest.Release(t, l) })
	return b, l, b.Ledger()
}

// The claims, history and Finish rules common to every ledger are checked
// by TestBackend (backendtest); what follows is etcd's own.

// TestLedger_NotPartOfTheElection: the ledger's keys live outside the
// election's prefix, so they neither lead nor hide the leader.
func TestLedger_NotPartOfTheElection(t *testing.T) {
	pfx := prefix(t)
	b, l, lg := leadLedger(t, dial(t, server(t).Addr()), pfx)
	ctx := context.Background()
	for _, job := range []string{"mail", "mail/runs"} {
		if err := claim(t, lg, job, tick0, l.Token()); err != nil {
			t.Fatalf("claim of %s: %v", job, err)
		}
	}
	if n := countKeys(t, dial(t, server(t).Addr()), pfx); n != 1 {
		t.Errorf("%d keys under the election prefix, want 1 (the leader's)", n)
	}
	if info, err := b.Leader(ctx); err != nil || info.Token != l.Token() {
		t.Errorf("Leader() = %+v, %v; want token %d", info, err, l.Token())
	}
}

func TestLedger_StaleTokenAfterTakeover(t *testing.T) {
	pfx := prefix(t)
	acli, aproxy := proxied(t)
	a := newBackend(t, acli, pfx, 2*time.Second)
	b := newBackend(t, dial(t, server(t).Addr()), pfx, 2*time.Second)
	la := backendtest.Acquire(t, a, "a", acquireWithin)
	if err := claim(t, a.Ledger(), "job", tick0, la.Token()); err != nil {
		t.Fatal(err)
	}
	// a is cut off; its lease expires; b takes over and claims.
	aproxy.Blackhole()
	lb := backendtest.Acquire(t, b, "b", acquireWithin)
	defer backendtest.Release(t, lb)
	if err := claim(t, b.Ledger(), "job", tick0.Add(time.Minute), lb.Token()); err != nil {
		t.Fatalf("b's claim: %v", err)
	}
	aproxy.Heal()
	// A claim with a's token fails whether or not a noticed yet.
	err := claim(t, a.Ledger(), "job", tick0.Add(2*time.Minute), la.Token())
	if !errors.Is(err, ledger.ErrStaleTerm) || !errors.Is(err, election.ErrLeadershipLost) {
		t.Fatalf("claim with the old token: err = %v, want ErrStaleTerm", err)
	}
	loseOnStale(la, err)
	if backendtest.IsOpen(la) || !errors.Is(la.Err(), election.ErrLeadershipLost) {
		t.Errorf("a's lease after a stale claim: open %v, Err %v", backendtest.IsOpen(la), la.Err())
	}
	backendtest.Release(t, la)
	// A token that is not a held term is refused without a transaction.
	if err := claim(t, b.Ledger(), "job", tick0.Add(3*time.Minute), lb.Token()+1000); !errors.Is(err, ledger.ErrStaleTerm) {
		t.Errorf("claim with an unknown token: %v", err)
	}
	if last, err := b.Ledger().LastClaimed(context.Background(), []string{"job"}); err != nil || !last[0].Equal(tick0.Add(time.Minute)) {
		t.Errorf("LastClaimed = %v, %v; want b's tick", last, err)
	}
}

// A term whose key is deleted while its lease still looks open locally is
// ended by the stale claim: the claim is refused, and the Host's
// Term.Lose (loseOnStale here) ends the lease at once.
func TestLedger_StaleClaimEndsTerm(t *testing.T) {
	pfx := prefix(t)
	admin := dial(t, server(t).Addr())
	a := newBackend(t, dial(t, server(t).Addr()), pfx, 2*time.Second)
	byClaim := 0
	for range 5 {
		la := backendtest.Acquire(t, a, "a", acquireWithin)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := admin.Delete(ctx, pfx+"/", clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
		cancel()
		err := claim(t, a.Ledger(), "job", time.Now(), la.Token())
		if !errors.Is(err, ledger.ErrStaleTerm) {
			t.Fatalf("claim after the leader key was deleted: %v", err)
		}
		loseOnStale(la, err)
		select {
		case <-la.Done():
		case <-time.After(time.Second):
			t.Fatal("lease still open after a stale claim")
		}
		if errors.Is(la.Err(), ledger.ErrStaleTerm) {
			byClaim++ // else the key watch was first
		}
		backendtest.Release(t, la)
	}
	t.Logf("5 trials: the stale claim itself ended the term %d times, the key watch %d times", byClaim, 5-byClaim)
}

// TestLedger_HistoryTrimsStoredKeys: the runs beyond the kept number are
// deleted from etcd, not only hidden, and Config.History sets that number.
func TestLedger_HistoryTrimsStoredKeys(t *testing.T) {
	pfx := prefix(t)
	cli := dial(t, server(t).Addr())
	_, l, lg := leadLedger(t, cli, pfx)
	n := ledger.DefaultHistory
	for i := range n + 7 {
		if err := claim(t, lg, "job", tick0.Add(time.Duration(i)*time.Second), l.Token()); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	ctx := context.Background()
	runs, err := lg.History(ctx, "job", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != n {
		t.Fatalf("History has %d runs, want %d", len(runs), n)
	}
	resp, err := cli.Get(ctx, pfx+"-ledger/job/runs/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != int64(n) {
		t.Errorf("%v run keys stored (%v), want %d", resp.Count, err, n)
	}
	if runs, _ := lg.History(ctx, "job", 3); len(runs) != 3 {
		t.Errorf("History(3) returned %d runs", len(runs))
	}

	// Config.History sets how many runs are kept.
	sb, err := etcd.New(etcd.Config{Client: cli, Prefix: prefix(t), Timing: election.Timing{TTL: 2 * time.Second}, History: 2})
	if err != nil {
		t.Fatal(err)
	}
	small := sb.Ledger()
	ls := backendtest.Acquire(t, sb, "s", acquireWithin)
	defer backendtest.Release(t, ls)
	for i := range 4 {
		if err := claim(t, small, "other", tick0.Add(time.Duration(i)*time.Second), ls.Token()); err != nil {
			t.Fatal(err)
		}
	}
	if runs, _ := small.History(ctx, "other", 10); len(runs) != 2 {
		t.Errorf("History 2 kept %d runs", len(runs))
	}
}

func TestLedger_Finish(t *testing.T) {
	_, l, lg := leadLedger(t, dial(t, server(t).Addr()), prefix(t))
	ctx := context.Background()
	if err := claim(t, lg, "job", tick0, l.Token()); err != nil {
		t.Fatal(err)
	}
	runs, _ := lg.History(ctx, "job", 1)
	r := runs[0]
	r.Ended, r.Result, r.Error = r.Started.Add(time.Second), ledger.ResultFailed, "boom"

	wrong := r
	wrong.Token++
	wrong.Result = ledger.ResultOK
	if err := finish(t, lg, wrong); err == nil {
		t.Error("Finish with another token succeeded")
	}
	missing := r
	missing.Tick = tick0.Add(time.Hour)
	if err := finish(t, lg, missing); err != nil {
		t.Errorf("Finish of an entry not in the history: %v, want nil (nothing to update)", err)
	}
	if runs, _ := lg.History(ctx, "job", 10); len(runs) != 1 {
		t.Errorf("Finish of an entry not in the history added one: %d runs", len(runs))
	}
	if err := finish(t, lg, r); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	runs, _ = lg.History(ctx, "job", 10)
	if len(runs) != 1 {
		t.Fatalf("History has %d runs, want 1", len(runs))
	}
	got := runs[0]
	if got.Result != ledger.ResultFailed || got.Error != "boom" || !got.Ended.Equal(r.Ended) || got.Token != l.Token() {
		t.Errorf("after Finish: %+v", got)
	}
	// Finish does not depend on the term: it records runs that end after a loss.
	backendtest.Release(t, l)
	r.Result = ledger.ResultCancelled
	if err := finish(t, lg, r); err != nil {
		t.Errorf("Finish after release: %v", err)
	}
}

// loseOnStale does what the Host does with a claim refused as stale: it
// ends the term at once (election.Term.Lose, through driver.Loser).
func loseOnStale(l election.Lease, err error) {
	if errors.Is(err, ledger.ErrStaleTerm) {
		l.(driver.Loser).Lose(err)
	}
}
