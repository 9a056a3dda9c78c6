package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
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

// rpcCounter counts the unary calls a client makes, by method.
type rpcCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.calls[method]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns the Txn and Range calls counted since the last take, and
// the count of every other method, and starts again from zero.
func (c *rpcCounter) take() (txn, rng int, other map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	txn, rng = c.calls["/etcdserverpb.KV/Txn"], c.calls["/etcdserverpb.KV/Range"]
	delete(c.calls, "/etcdserverpb.KV/Txn")
	delete(c.calls, "/etcdserverpb.KV/Range")
	other, c.calls = c.calls, map[string]int{}
	return txn, rng, other
}

// countedClient returns a client of the test server whose unary calls
// (each attempt, retries included) are counted; closed when t ends.
func countedClient(t *testing.T) (*clientv3.Client, *rpcCounter) {
	t.Helper()
	c := &rpcCounter{calls: map[string]int{}}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{"http://" + server(t).Addr()},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		DialOptions:          []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.intercept)},
		Logger:               zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	c.take() // whatever New sent
	return cli, c
}

// countedLedger leads the election pfx through a client of its own and
// returns the term and a ledger of the same election whose calls are
// counted: the term's renewals and watch go through the other client.
func countedLedger(t *testing.T, pfx string, cfg etcd.Config) (election.Lease, ledger.Ledger, *rpcCounter) {
	t.Helper()
	_, l, _ := leadLedger(t, dial(t, server(t).Addr()), pfx)
	cli, counter := countedClient(t)
	cfg.Client, cfg.Prefix = cli, pfx
	b, err := etcd.New(cfg)
	if err != nil {
		t.Fatalf("etcd.New: %v", err)
	}
	return l, b.Ledger(), counter
}

func batchCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func allNil(t *testing.T, what string, errs []error, n int) {
	t.Helper()
	if len(errs) != n {
		t.Fatalf("%s of %d returned %d errors", what, n, len(errs))
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: item %d: %v", what, i, err)
		}
	}
}

// TestLedger_RoundTrips: 300 claims, finishes or reads of last claimed
// ticks take one transaction per batch (124 claims or finishes, 128
// reads), and no other request once the ledger knows the term's key and
// the revisions of its own claims.
func TestLedger_RoundTrips(t *testing.T) {
	const n = 300
	l, lg, calls := countedLedger(t, prefix(t), etcd.Config{Timing: election.Timing{TTL: 2 * time.Second}})
	if got := lg.MaxBatch(); got != etcd.DefaultMaxTxnOps-4 {
		t.Fatalf("MaxBatch() = %d, want %d", got, etcd.DefaultMaxTxnOps-4)
	}
	ctx := batchCtx(t)
	jobs := make([]string, n)
	cs := make([]ledger.Claim, n)
	for i := range cs {
		jobs[i] = fmt.Sprintf("job-%03d", i)
		cs[i] = ledger.Claim{Job: jobs[i], Tick: tick0, Token: l.Token(), Instance: "i1", Started: time.Now()}
	}
	check := func(what string, wantTxn, wantRange int) {
		t.Helper()
		txn, rng, other := calls.take()
		if txn != wantTxn || rng != wantRange || len(other) != 0 {
			t.Errorf("%s: %d Txn, %d Range, others %v; want %d Txn, %d Range, no other", what, txn, rng, other, wantTxn, wantRange)
		}
	}

	// The first claim of a term reads the election's candidates once.
	allNil(t, "first Claim", lg.Claim(ctx, cs), n)
	check("Claim of 300 with a new token", 3, 1)
	for i := range cs {
		cs[i].Tick = tick0.Add(time.Minute)
	}
	allNil(t, "Claim", lg.Claim(ctx, cs), n)
	check("Claim of 300", 3, 0)

	last, err := lg.LastClaimed(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	check("LastClaimed of 300", 3, 0)
	for i, tk := range last {
		if !tk.Equal(tick0.Add(time.Minute)) {
			t.Fatalf("LastClaimed()[%d] = %v, want %v", i, tk, tick0.Add(time.Minute))
		}
	}

	rs := make([]ledger.Run, n)
	for i, c := range cs {
		rs[i] = ledger.Run{Job: c.Job, Tick: c.Tick, Instance: c.Instance, Token: c.Token, Started: c.Started,
			Ended: c.Started.Add(time.Second), Result: ledger.ResultOK}
	}
	allNil(t, "Finish", lg.Finish(ctx, rs), n)
	check("Finish of 300 runs claimed by this ledger", 3, 0)

	// A finish whose claim this ledger does not remember (finished
	// already, here) reads the entries first: two transactions a batch.
	for i := range rs {
		rs[i].Result = ledger.ResultFailed
	}
	allNil(t, "Finish again", lg.Finish(ctx, rs), n)
	check("Finish of 300 runs not remembered", 6, 0)

	for _, i := range []int{0, 123, 124, 299} {
		runs, err := lg.History(ctx, jobs[i], 10)
		if err != nil || len(runs) != 2 || runs[0].Result != ledger.ResultFailed || runs[1].Result != ledger.ResultRunning {
			t.Errorf("History(%s) = %+v, %v; want the finished run, then the first one running", jobs[i], runs, err)
		}
	}
	calls.take()
}

// TestLedger_MaxTxnOps: Config.MaxTxnOps sets the batch, and a value
// above the server's (128 here) makes it refuse the batch: every claim
// of it has an error that is neither stale nor claimed (outcome
// unknown to the caller), and none is recorded.
func TestLedger_MaxTxnOps(t *testing.T) {
	pfx := prefix(t)
	l, lg, calls := countedLedger(t, pfx, etcd.Config{Timing: election.Timing{TTL: 2 * time.Second}, MaxTxnOps: 16})
	if got := lg.MaxBatch(); got != 12 {
		t.Fatalf("MaxBatch() with MaxTxnOps 16 = %d, want 12", got)
	}
	ctx := batchCtx(t)
	claims := func(n int, tick time.Time) []ledger.Claim {
		cs := make([]ledger.Claim, n)
		for i := range cs {
			cs[i] = ledger.Claim{Job: fmt.Sprintf("job-%03d", i), Tick: tick, Token: l.Token(), Instance: "i1", Started: time.Now()}
		}
		return cs
	}
	allNil(t, "Claim", lg.Claim(ctx, claims(30, tick0)), 30)
	if txn, _, _ := calls.take(); txn != 3 {
		t.Errorf("Claim of 30 with MaxBatch 12: %d transactions, want 3", txn)
	}

	big, err := etcd.New(etcd.Config{Client: dial(t, server(t).Addr()), Prefix: pfx, MaxTxnOps: 200})
	if err != nil {
		t.Fatal(err)
	}
	blg := big.Ledger()
	cs := claims(blg.MaxBatch(), tick0.Add(time.Minute))
	errs := blg.Claim(ctx, cs)
	for i, err := range errs {
		if err == nil || errors.Is(err, ledger.ErrStaleTerm) || errors.Is(err, ledger.ErrTickClaimed) ||
			!strings.Contains(err.Error(), "too many operations") {
			t.Fatalf("claim %d of %d, above the server's --max-txn-ops: %v; want the server's refusal", i, len(cs), err)
		}
	}
	t.Logf("a batch of %d claims on a server with --max-txn-ops 128: %v", len(cs), errs[0])
	if last, err := lg.LastClaimed(ctx, []string{"job-000"}); err != nil || !last[0].Equal(tick0) {
		t.Errorf("LastClaimed after the refused batch = %v, %v; want %v", last, err, tick0)
	}
}

// runKeys counts the run entries of job stored in the ledger of pfx.
func runKeys(t *testing.T, cli *clientv3.Client, pfx, job string) int64 {
	t.Helper()
	return countKeys(t, cli, pfx+"-ledger/"+job+"/runs")
}

// TestLedger_HistoryTrimmedByClaims: the claims themselves delete the
// run entries beyond History (3 here). Through one ledger a job holds
// exactly History entries; claims each through a new ledger (which
// knows nothing of the job) leave at most History + 1; a ledger with a
// lower History trims a job to it at its first claim.
func TestLedger_HistoryTrimmedByClaims(t *testing.T) {
	const keep = 3
	pfx := prefix(t)
	cli := dial(t, server(t).Addr())
	b, err := etcd.New(etcd.Config{Client: cli, Prefix: pfx, Timing: election.Timing{TTL: 2 * time.Second}, History: keep})
	if err != nil {
		t.Fatal(err)
	}
	l := backendtest.Acquire(t, b, "a", acquireWithin)
	defer backendtest.Release(t, l)
	lg := b.Ledger()
	ctx := batchCtx(t)
	tick := func(i int) time.Time { return tick0.Add(time.Duration(i) * time.Minute) }

	i := 0
	for ; i < 3*keep; i++ {
		if err := claim(t, lg, "one", tick(i), l.Token()); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if got, want := runKeys(t, cli, pfx, "one"), int64(min(i+1, keep)); got != want {
			t.Fatalf("after claim %d through one ledger: %d run entries stored, want %d", i, got, want)
		}
	}
	runs, err := lg.History(ctx, "one", 100)
	if err != nil || len(runs) != keep || !runs[0].Tick.Equal(tick(i-1)) || !runs[keep-1].Tick.Equal(tick(i-keep)) {
		t.Fatalf("History = %+v, %v; want the %d newest", runs, err, keep)
	}

	for ; i < 6*keep; i++ {
		if err := claim(t, b.Ledger(), "one", tick(i), l.Token()); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if got := runKeys(t, cli, pfx, "one"); got < keep || got > keep+1 {
			t.Fatalf("after claim %d through a new ledger: %d run entries stored, want %d or %d", i, got, keep, keep+1)
		}
	}
	if runs, err := b.Ledger().History(ctx, "one", 100); err != nil || len(runs) != keep || !runs[0].Tick.Equal(tick(i-1)) {
		t.Fatalf("History = %+v, %v; want the %d newest", runs, err, keep)
	}

	// History lowered to 1: the first claim trims the job to one entry.
	small, err := etcd.New(etcd.Config{Client: cli, Prefix: pfx, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := claim(t, small.Ledger(), "one", tick(i), l.Token()); err != nil {
		t.Fatal(err)
	}
	if got := runKeys(t, cli, pfx, "one"); got != 1 {
		t.Errorf("after a claim with History 1: %d run entries stored, want 1", got)
	}
	if runs, err := lg.History(ctx, "one", 100); err != nil || len(runs) != 1 || !runs[0].Tick.Equal(tick(i)) {
		t.Errorf("History = %+v, %v; want the newest only", runs, err)
	}
	if last, err := lg.LastClaimed(ctx, []string{"one"}); err != nil || !last[0].Equal(tick(i)) {
		t.Errorf("LastClaimed = %v, %v; want %v", last, err, tick(i))
	}
}

// TestLedger_FinishOtherToken: a Finish with a token other than the one
// its run entry was claimed with is refused and changes nothing, whether
// the ledger claimed that run itself (and then still finishes it in one
// transaction with the right token) or not.
func TestLedger_FinishOtherToken(t *testing.T) {
	pfx := prefix(t)
	la, lg, calls := countedLedger(t, pfx, etcd.Config{Timing: election.Timing{TTL: 2 * time.Second}})
	ctx := batchCtx(t)
	for _, job := range []string{"mine", "theirs"} {
		if err := claim(t, lg, job, tick0, la.Token()); err != nil {
			t.Fatal(err)
		}
	}
	done := ledger.Run{Job: "mine", Tick: tick0, Instance: "i1", Token: la.Token(), Started: tick0,
		Ended: tick0.Add(time.Second), Result: ledger.ResultOK}
	wrong := done
	wrong.Token++
	wrong.Result, wrong.Error = ledger.ResultFailed, "not mine"
	if err := finish(t, lg, wrong); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("Finish with another token: %v, want refused", err)
	}
	calls.take()
	if err := finish(t, lg, done); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if txn, rng, _ := calls.take(); txn != 1 || rng != 0 {
		t.Errorf("Finish of its own claim after a refused one: %d Txn, %d Range; want one Txn", txn, rng)
	}
	if runs, err := lg.History(ctx, "mine", 10); err != nil || len(runs) != 1 || runs[0].Result != ledger.ResultOK || runs[0].Token != la.Token() {
		t.Errorf("History = %+v, %v; want the run finished ok with token %d", runs, err, la.Token())
	}

	// The next term finishes, through a ledger of its own, the run of
	// the previous term's claim, with its own token: refused.
	backendtest.Release(t, la)
	b := newBackend(t, dial(t, server(t).Addr()), pfx, 2*time.Second)
	lb := backendtest.Acquire(t, b, "b", acquireWithin)
	defer backendtest.Release(t, lb)
	theirs := ledger.Run{Job: "theirs", Tick: tick0, Instance: "i2", Token: lb.Token(), Started: tick0,
		Ended: tick0.Add(time.Second), Result: ledger.ResultCancelled, Error: "not mine either"}
	if err := finish(t, b.Ledger(), theirs); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("Finish of the previous term's run with the new token: %v, want refused", err)
	}
	if runs, err := lg.History(ctx, "theirs", 10); err != nil || len(runs) != 1 || runs[0].Result != ledger.ResultRunning || runs[0].Token != la.Token() {
		t.Errorf("History = %+v, %v; want the run still running with token %d", runs, err, la.Token())
	}
	// With its own token the run is finished, the term over or not.
	theirs.Token = la.Token()
	if err := finish(t, b.Ledger(), theirs); err != nil {
		t.Errorf("Finish with the claim's token after its term ended: %v", err)
	}
	if runs, err := lg.History(ctx, "theirs", 10); err != nil || len(runs) != 1 || runs[0].Result != ledger.ResultCancelled {
		t.Errorf("History = %+v, %v; want the run cancelled", runs, err)
	}
}

// TestLedger_BatchDefensive: a call with a job twice claims the first
// and refuses the second unsent; one with a run twice finishes the
// first; claims of another token in the same call are judged by their
// own term.
func TestLedger_BatchDefensive(t *testing.T) {
	pfx := prefix(t)
	_, l, lg := leadLedger(t, dial(t, server(t).Addr()), pfx)
	ctx := batchCtx(t)
	c := func(job string, tick time.Time, token uint64) ledger.Claim {
		return ledger.Claim{Job: job, Tick: tick, Token: token, Instance: "i1", Started: tick}
	}
	later := tick0.Add(time.Minute)
	errs := lg.Claim(ctx, []ledger.Claim{c("a", tick0, l.Token()), c("b", tick0, l.Token()), c("a", later, l.Token()), c("c", tick0, l.Token()+1)})
	if len(errs) != 4 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("Claim = %v; want a and b claimed", errs)
	}
	if err := errs[2]; err == nil || errors.Is(err, ledger.ErrTickClaimed) || errors.Is(err, ledger.ErrStaleTerm) || !strings.Contains(err.Error(), "not sent") {
		t.Errorf("second claim of a in one call: %v, want refused unsent", err)
	}
	if !errors.Is(errs[3], ledger.ErrStaleTerm) {
		t.Errorf("claim with a token that never led, in the same call: %v, want ErrStaleTerm", errs[3])
	}
	last, err := lg.LastClaimed(ctx, []string{"a", "b", "c", "a"})
	if err != nil || !last[0].Equal(tick0) || !last[1].Equal(tick0) || !last[2].IsZero() || !last[3].Equal(tick0) {
		t.Errorf("LastClaimed(a, b, c, a) = %v, %v", last, err)
	}

	r := ledger.Run{Job: "a", Tick: tick0, Instance: "i1", Token: l.Token(), Started: tick0, Ended: later, Result: ledger.ResultOK}
	again := r
	again.Result = ledger.ResultFailed
	errs = lg.Finish(ctx, []ledger.Run{r, again})
	if len(errs) != 2 || errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "not sent") {
		t.Errorf("Finish of one run twice in one call = %v; want the first finished, the second refused unsent", errs)
	}
	if runs, err := lg.History(ctx, "a", 10); err != nil || len(runs) != 1 || runs[0].Result != ledger.ResultOK {
		t.Errorf("History = %+v, %v; want the run ok", runs, err)
	}
}

// TestLedger_FinishSplitsLargeBatches: runs with long error texts are
// sent in as many transactions as etcd's request size limit (1.5 MiB by
// default) needs, not in one it would refuse.
func TestLedger_FinishSplitsLargeBatches(t *testing.T) {
	pfx := prefix(t)
	l, lg, calls := countedLedger(t, pfx, etcd.Config{Timing: election.Timing{TTL: 2 * time.Second}})
	ctx := batchCtx(t)
	const n = 8
	cs := make([]ledger.Claim, n)
	for i := range cs {
		cs[i] = ledger.Claim{Job: fmt.Sprintf("job-%d", i), Tick: tick0, Token: l.Token(), Instance: "i1", Started: tick0}
	}
	allNil(t, "Claim", lg.Claim(ctx, cs), n)
	calls.take()
	long := strings.Repeat("x", 400<<10)
	rs := make([]ledger.Run, n)
	for i, c := range cs {
		rs[i] = ledger.Run{Job: c.Job, Tick: c.Tick, Instance: c.Instance, Token: c.Token, Started: c.Started,
			Ended: c.Started.Add(time.Second), Result: ledger.ResultFailed, Error: long}
	}
	allNil(t, "Finish", lg.Finish(ctx, rs), n)
	if txn, _, _ := calls.take(); txn != 4 {
		t.Errorf("Finish of %d runs of %d KiB: %d transactions, want 4 (two runs each)", n, len(long)>>10, txn)
	}
	if runs, err := lg.History(ctx, "job-7", 1); err != nil || len(runs) != 1 || runs[0].Error != long {
		t.Errorf("History(job-7) after Finish: %d runs, %v; want the long error", len(runs), err)
	}
}
