package consul_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/consultest"
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

// The batched ledger's promises in round trips: counted by a transport
// that sorts every request to the agent.

// trips counts requests by kind: "txn-write" (a transaction with a write
// operation), "txn-read" (only reads and checks), "kv" (the KV endpoint),
// "other".
type trips map[string]int

// countingTransport forwards requests to the agent and counts them. If
// before is set, it runs before each request is forwarded (with its kind
// and operations) and may refuse it by returning a response.
type countingTransport struct {
	mu     sync.Mutex
	n      trips
	maxOps int // the most operations one transaction carried to the agent
	before func(kind string, ops api.TxnOps) *http.Response
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := "other"
	var ops api.TxnOps
	switch {
	case req.URL.Path == "/v1/txn":
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if err := json.Unmarshal(body, &ops); err != nil {
			return nil, fmt.Errorf("counting transport: decode transaction: %w", err)
		}
		kind = "txn-read"
		for _, op := range ops {
			switch op.KV.Verb {
			case api.KVGet, api.KVGetOrEmpty, api.KVGetTree, api.KVCheckSession, api.KVCheckIndex, api.KVCheckNotExists:
			default:
				kind = "txn-write"
			}
		}
	case strings.HasPrefix(req.URL.Path, "/v1/kv/"):
		kind = "kv"
	}
	c.mu.Lock()
	before := c.before
	c.mu.Unlock()
	if before != nil {
		if resp := before(kind, ops); resp != nil {
			resp.Request = req
			return resp, nil
		}
	}
	c.mu.Lock()
	c.n[kind]++
	c.maxOps = max(c.maxOps, len(ops))
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// take returns the counts since the last take and resets them.
func (c *countingTransport) take() trips {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = trips{}
	return n
}

func (c *countingTransport) setBefore(f func(kind string, ops api.TxnOps) *http.Response) {
	c.mu.Lock()
	c.before = f
	c.mu.Unlock()
}

// countingBackend returns a Backend on key whose requests to agent a go
// through a counting transport.
func countingBackend(t *testing.T, a *consultest.Agent, key string, adjust func(*consul.Config)) (*consul.Backend, *countingTransport) {
	t.Helper()
	ct := &countingTransport{n: trips{}}
	cfg := api.DefaultNonPooledConfig()
	cfg.Address, cfg.Scheme, cfg.TokenFile = a.HTTPAddr, "http", ""
	cfg.HttpClient = &http.Client{Transport: ct}
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return backendOn(t, c, key, adjust), ct
}

// lead takes a term of the election on key with a Backend of its own,
// released when t ends.
func lead(t *testing.T, a *consultest.Agent, key string) election.Lease {
	t.Helper()
	l := backendtest.Acquire(t, newCandidate(t, a, key), "leader", 30*time.Second)
	t.Cleanup(func() { backendtest.Release(t, l) })
	return l
}

// countedLedger takes a term of the election on a fresh key of the shared
// agent with a Backend of its own (lead), so that its renewals and watch
// are not counted, and returns the agent, the key, the term, the Ledger of
// a counting Backend of the same election (countingBackend), its counting
// transport and a context for the test (bctx).
func countedLedger(t *testing.T) (*consultest.Agent, string, election.Lease, ledger.Ledger, *countingTransport, context.Context) {
	t.Helper()
	a := sharedAgent(t)
	key := newKey(t)
	l := lead(t, a, key)
	b, ct := countingBackend(t, a, key, nil)
	lg := b.Ledger()
	ctx := bctx(t)
	return a, key, l, lg, ct, ctx
}

// agentBefore114 returns a counting Backend of a fresh election on the
// shared agent (countingBackend) whose transport answers as an agent
// older than Consul 1.14 does: a transaction of more than 64 operations
// is refused (413), nothing applied. With it, its Ledger, its counting
// transport and a context for the test (bctx).
func agentBefore114(t *testing.T) (*consul.Backend, ledger.Ledger, *countingTransport, context.Context) {
	t.Helper()
	a := sharedAgent(t)
	b, ct := countingBackend(t, a, newKey(t), nil)
	ct.setBefore(func(kind string, ops api.TxnOps) *http.Response {
		if len(ops) <= 64 {
			return nil
		}
		return &http.Response{StatusCode: http.StatusRequestEntityTooLarge, Status: "413 Request Entity Too Large",
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
			Body: io.NopCloser(strings.NewReader(fmt.Sprintf("Transaction contains too many operations (%d > 64)", len(ops))))}
	})
	lg := b.Ledger()
	ctx := bctx(t)
	return b, lg, ct, ctx
}

func tripsAre(t *testing.T, what string, got, want trips) {
	t.Helper()
	for _, k := range []string{"txn-write", "txn-read", "kv", "other"} {
		if got[k] != want[k] {
			t.Errorf("%s: %d %s round trips, want %d (all: %v)", what, got[k], k, want[k], got)
		}
	}
}

func bctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func claimsAt(jobs []string, tick time.Time, token uint64, instance string) []ledger.Claim {
	cs := make([]ledger.Claim, len(jobs))
	for i, job := range jobs {
		cs[i] = ledger.Claim{Job: job, Tick: tick, Token: token, Instance: instance, Started: tick}
	}
	return cs
}

func finishesOf(cs []ledger.Claim, result ledger.Result) []ledger.Run {
	rs := make([]ledger.Run, len(cs))
	for i, c := range cs {
		rs[i] = ledger.Run{Job: c.Job, Tick: c.Tick, Instance: c.Instance, Token: c.Token, Started: c.Started,
			Ended: c.Started.Add(time.Second), Result: result}
	}
	return rs
}

func jobNames(n int) []string {
	jobs := make([]string, n)
	for i := range jobs {
		jobs[i] = fmt.Sprintf("job-%05d", i)
	}
	return jobs
}

func allNil(t *testing.T, what string, errs []error, n int) {
	t.Helper()
	if len(errs) != n {
		t.Fatalf("%s: %d errors for %d items", what, len(errs), n)
	}
	bad := 0
	for i, err := range errs {
		if err != nil {
			if bad++; bad <= 3 {
				t.Errorf("%s: item %d: %v", what, i, err)
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d items failed in all", what, bad)
	}
}

var batchTick = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// TestLedger_BatchRoundTrips: a Claim of 3*MaxBatch jobs is one write
// transaction per MaxBatch, plus one read of the "last" entries per chunk
// and one of the lock key the first time; a job claimed before through the
// same Ledger needs no read. Finish of as many runs is one write per
// chunk (plus one read per chunk through a Ledger that did not claim
// them); LastClaimed reads 128 jobs per round trip.
func TestLedger_BatchRoundTrips(t *testing.T) {
	a, key, l, lg, ct, ctx := countedLedger(t)
	tok := l.Token()
	mb := lg.MaxBatch()
	if mb != 127 {
		t.Errorf("MaxBatch() = %d, want 127 (128 operations: a check-session and a CAS per claim)", mb)
	}
	n := 3 * mb
	jobs := jobNames(n)
	ct.take()

	cs0 := claimsAt(jobs, batchTick, tok, "a")
	allNil(t, "first Claim", lg.Claim(ctx, cs0), n)
	tripsAre(t, "first Claim", ct.take(), trips{"txn-write": 3, "txn-read": 3, "kv": 1})

	cs1 := claimsAt(jobs, batchTick.Add(time.Minute), tok, "a")
	allNil(t, "second Claim", lg.Claim(ctx, cs1), n)
	tripsAre(t, "second Claim (jobs and session known)", ct.take(), trips{"txn-write": 3})

	allNil(t, "Finish", lg.Finish(ctx, finishesOf(cs1, ledger.ResultOK)), n)
	tripsAre(t, "Finish of claims made through this Ledger", ct.take(), trips{"txn-write": 3})

	last, err := lg.LastClaimed(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	tripsAre(t, "LastClaimed", ct.take(), trips{"txn-read": 3}) // 381 jobs, 128 per read
	for i := range jobs {
		if !last[i].Equal(cs1[i].Tick) {
			t.Fatalf("LastClaimed()[%d] = %v, want %v", i, last[i], cs1[i].Tick)
		}
	}

	// Another Ledger (another process) finishes the first claims: it
	// looks the runs up first, one read per chunk (of their jobs' keys,
	// which tells it the ring slots too).
	b2, ct2 := countingBackend(t, a, key, nil)
	lg2 := b2.Ledger()
	allNil(t, "Finish through another Ledger", lg2.Finish(ctx, finishesOf(cs0, ledger.ResultFailed)), n)
	tripsAre(t, "Finish through another Ledger", ct2.take(), trips{"txn-write": 3, "txn-read": 3})
	for _, i := range []int{0, mb - 1, mb, n - 1} {
		h, err := lg.History(ctx, jobs[i], 10)
		if err != nil || len(h) != 2 || h[0].Result != ledger.ResultOK || h[1].Result != ledger.ResultFailed {
			t.Errorf("History(%s) = %+v, %v; want the second run ok, the first failed", jobs[i], h, err)
		}
	}

	// LastClaimed tells the other Ledger the jobs' "last" entries: its
	// Claim then reads only the lock key.
	if _, err := lg2.LastClaimed(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	ct2.take()
	allNil(t, "Claim through another Ledger", lg2.Claim(ctx, claimsAt(jobs, batchTick.Add(2*time.Minute), tok, "a")), n)
	tripsAre(t, "Claim through another Ledger after LastClaimed", ct2.take(), trips{"txn-write": 3, "kv": 1})
	ct.take()
	// The first Ledger's knowledge is stale now: its CAS fail (the term
	// check passing), it reads them again and finds the ticks claimed.
	errs := lg.Claim(ctx, claimsAt(jobs, batchTick.Add(2*time.Minute), tok, "a"))
	for i, err := range errs {
		if !errors.Is(err, ledger.ErrTickClaimed) {
			t.Fatalf("claim %d of a tick claimed through another Ledger: %v, want ErrTickClaimed", i, err)
		}
	}
	tripsAre(t, "Claim of ticks claimed through another Ledger", ct.take(), trips{"txn-write": 3, "txn-read": 3})
}

// TestLedger_HistoryStaysBounded: many claims of one job, some finished,
// keep at most History ring entries and one short "last" entry, nothing
// else, and History shows the newest runs as they ended.
func TestLedger_HistoryStaysBounded(t *testing.T) {
	sharedAgent(t)
	key := newKey(t)
	const keep = 5
	const job = "mail/daily report"
	b := backendOn(t, mustClient(t), key, func(c *consul.Config) { c.History = keep })
	lg := b.Ledger()
	ctx := bctx(t)
	l := backendtest.Acquire(t, b, "a", 30*time.Second)
	defer backendtest.Release(t, l)
	const n = 4*keep + 2
	for i := range n {
		c := ledger.Claim{Job: job, Tick: batchTick.Add(time.Duration(i) * time.Minute), Token: l.Token(), Instance: "a"}
		allNil(t, fmt.Sprintf("Claim %d", i), lg.Claim(ctx, []ledger.Claim{c}), 1)
		if i%3 == 0 {
			allNil(t, fmt.Sprintf("Finish %d", i), lg.Finish(ctx, finishesOf([]ledger.Claim{c}, ledger.ResultOK)), 1)
		}
	}
	pairs, _, err := mustClient(t).KV().List(key+"-ledger/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) > keep+1 {
		t.Errorf("after %d claims with History %d the ledger has %d keys, want at most %d", n, keep, len(pairs), keep+1)
	}
	for _, p := range pairs {
		t.Logf("%s: %d bytes", p.Key, len(p.Value))
		if strings.HasSuffix(p.Key, "/last") && len(p.Value) > 1024 {
			t.Errorf("%s holds %d bytes: %s", p.Key, len(p.Value), p.Value)
		}
	}
	h, err := lg.History(ctx, job, 100)
	if err != nil || len(h) != keep {
		t.Fatalf("History = %d runs, %v; want %d", len(h), err, keep)
	}
	for k, r := range h {
		i := n - 1 - k
		want := ledger.ResultRunning
		if i%3 == 0 {
			want = ledger.ResultOK
		}
		if !r.Tick.Equal(batchTick.Add(time.Duration(i)*time.Minute)) || r.Result != want || r.Job != job {
			t.Errorf("History()[%d] = %+v, want claim %d, %s", k, r, i, want)
		}
	}
}

// TestLedger_RunsGoingBeyondLast: a job's runs not finished when the next
// ones are claimed ride in its "last" entry, up to 3; a claim that would
// make it carry more first copies the oldest into the ring (one more
// write). Their Finish, in one write, replaces the copies.
func TestLedger_RunsGoingBeyondLast(t *testing.T) {
	_, key, l, lg, ct, ctx := countedLedger(t)
	var cs []ledger.Claim
	for i := range 5 {
		c := ledger.Claim{Job: "long", Tick: batchTick.Add(time.Duration(i) * time.Minute), Token: l.Token(), Instance: "a"}
		cs = append(cs, c)
		ct.take()
		allNil(t, fmt.Sprintf("Claim %d", i), lg.Claim(ctx, []ledger.Claim{c}), 1)
		want := trips{"txn-write": 1}
		switch {
		case i == 0:
			want = trips{"txn-write": 1, "txn-read": 1, "kv": 1}
		case i >= 3:
			want = trips{"txn-write": 2} // the copy of the oldest run going
		}
		tripsAre(t, fmt.Sprintf("Claim %d", i), ct.take(), want)
	}
	h, err := lg.History(ctx, "long", 10)
	if err != nil || len(h) != 5 {
		t.Fatalf("History = %+v, %v; want 5 runs", h, err)
	}
	for k, r := range h {
		if !r.Tick.Equal(cs[4-k].Tick) || r.Result != ledger.ResultRunning {
			t.Errorf("History()[%d] = %+v, want claim %d running", k, r, 4-k)
		}
	}
	ct.take()
	allNil(t, "Finish", lg.Finish(ctx, finishesOf(cs, ledger.ResultOK)), len(cs))
	tripsAre(t, "Finish of 5 runs, 2 copied to the ring", ct.take(), trips{"txn-write": 1})
	h, err = lg.History(ctx, "long", 10)
	if err != nil || len(h) != 5 {
		t.Fatalf("History = %+v, %v; want 5 runs", h, err)
	}
	for k, r := range h {
		if !r.Tick.Equal(cs[4-k].Tick) || r.Result != ledger.ResultOK {
			t.Errorf("History()[%d] after Finish = %+v, want claim %d ok", k, r, 4-k)
		}
	}
	// Finished runs are no longer carried.
	c := ledger.Claim{Job: "long", Tick: batchTick.Add(time.Hour), Token: l.Token(), Instance: "a"}
	ct.take()
	allNil(t, "Claim after Finish", lg.Claim(ctx, []ledger.Claim{c}), 1)
	tripsAre(t, "Claim after Finish", ct.take(), trips{"txn-write": 1})
	pair, _, err := mustClient(t).KV().Get(key+"-ledger/long/last", nil)
	if err != nil || pair == nil || strings.Count(string(pair.Value), `"started"`) != 1 {
		t.Errorf("last entry after all runs finished = %s, %v; want one run carried", pair.Value, err)
	}
}

// TestLedger_TakeoverRoundTrips: a Ledger taking over jobs claimed
// through another one (past their first History runs) reads each job's
// "last" entry once to claim, and the ring slot once to finish; what it
// wrote itself it does not read again.
func TestLedger_TakeoverRoundTrips(t *testing.T) {
	a := sharedAgent(t)
	key := newKey(t)
	const keep = 3
	l := lead(t, a, key)
	ctx := bctx(t)
	jobs := jobNames(20)
	old := backendOn(t, mustClient(t), key, func(c *consul.Config) { c.History = keep }).Ledger()
	tick := func(i int) time.Time { return batchTick.Add(time.Duration(i) * time.Minute) }
	for i := range keep + 2 {
		cs := claimsAt(jobs, tick(i), l.Token(), "old")
		allNil(t, "Claim", old.Claim(ctx, cs), len(cs))
		allNil(t, "Finish", old.Finish(ctx, finishesOf(cs, ledger.ResultOK)), len(cs))
	}
	b, ct := countingBackend(t, a, key, func(c *consul.Config) { c.History = keep })
	lg := b.Ledger()
	for i := keep + 2; i < 3*keep+2; i++ {
		cs := claimsAt(jobs, tick(i), l.Token(), "new")
		ct.take()
		allNil(t, "Claim", lg.Claim(ctx, cs), len(cs))
		want := trips{"txn-write": 1}
		if i == keep+2 {
			want = trips{"txn-write": 1, "txn-read": 1, "kv": 1}
		}
		tripsAre(t, fmt.Sprintf("Claim %d", i), ct.take(), want)
		allNil(t, "Finish", lg.Finish(ctx, finishesOf(cs, ledger.ResultFailed)), len(cs))
		want = trips{"txn-write": 1}
		if i < 2*keep+2 {
			want = trips{"txn-write": 1, "txn-read": 1} // a slot the old Ledger wrote
		}
		tripsAre(t, fmt.Sprintf("Finish %d", i), ct.take(), want)
	}
	for _, job := range []string{jobs[0], jobs[19]} {
		h, err := lg.History(ctx, job, 10)
		if err != nil || len(h) != keep {
			t.Fatalf("History(%s) = %+v, %v; want %d runs", job, h, err, keep)
		}
		for k, r := range h {
			if want := tick(3*keep + 1 - k); !r.Tick.Equal(want) || r.Result != ledger.ResultFailed || r.Instance != "new" {
				t.Errorf("History(%s)[%d] = %+v, want the run at %v, failed, by new", job, k, r, want)
			}
		}
	}
}

// TestLedger_ConcurrentWriterMidBatch: another writer changes two jobs'
// "last" entries between the reads and the write of a batch. The write
// is refused as a whole; of its claims only those two are read again: the
// one whose tick the other writer claimed is refused, the other one (its
// entry changed, its tick not claimed) is claimed at the second attempt
// with the rest.
func TestLedger_ConcurrentWriterMidBatch(t *testing.T) {
	_, key, l, lg, ct, ctx := countedLedger(t)
	tok := l.Token()
	jobs := jobNames(10)
	allNil(t, "first Claim", lg.Claim(ctx, claimsAt(jobs, batchTick, tok, "a")), len(jobs))

	other := backendOn(t, mustClient(t), key, nil).Ledger()
	admin := mustClient(t)
	next := batchTick.Add(time.Minute)
	var once sync.Once
	var hookErr error
	ct.setBefore(func(kind string, ops api.TxnOps) *http.Response {
		if kind == "txn-write" {
			once.Do(func() {
				// Another process claims job 3 at the same tick ...
				if err := other.Claim(ctx, claimsAt(jobs[3:4], next, tok, "other"))[0]; err != nil {
					hookErr = err
				}
				// ... and something rewrites job 5's entry as it was.
				lastKey := key + "-ledger/" + jobs[5] + "/last"
				pair, _, err := admin.KV().Get(lastKey, nil)
				if err == nil && pair != nil {
					_, err = admin.KV().Put(&api.KVPair{Key: lastKey, Value: pair.Value}, nil)
				}
				if err != nil || pair == nil {
					hookErr = fmt.Errorf("rewrite %s: %v (%v)", lastKey, err, pair)
				}
			})
		}
		return nil
	})
	ct.take()
	errs := lg.Claim(ctx, claimsAt(jobs, next, tok, "a"))
	ct.setBefore(nil)
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	for i, err := range errs {
		if i == 3 {
			if !errors.Is(err, ledger.ErrTickClaimed) {
				t.Errorf("claim of job 3, claimed meanwhile by another writer: %v, want ErrTickClaimed", err)
			}
		} else if err != nil {
			t.Errorf("claim of job %d: %v", i, err)
		}
	}
	tripsAre(t, "Claim with two jobs changed under it", ct.take(), trips{"txn-write": 2, "txn-read": 1})
	for i, job := range jobs {
		want := "a"
		if i == 3 {
			want = "other"
		}
		h, err := lg.History(ctx, job, 10)
		if err != nil || len(h) != 2 || !h[0].Tick.Equal(next) || h[0].Instance != want {
			t.Errorf("History(%s) = %+v, %v; want 2 runs, the newest at %v by %s", job, h, err, next, want)
		}
	}
}

// TestLedger_FinishMidWrite: another process finishes one of the runs
// between this Ledger's claim and its Finish of a batch. The Finish's
// write is refused as a whole; only that run's ring entry is read again
// (it holds the run: it is replaced), the rest sent again.
func TestLedger_FinishMidWrite(t *testing.T) {
	_, key, l, lg, ct, ctx := countedLedger(t)
	jobs := jobNames(10)
	cs := claimsAt(jobs, batchTick, l.Token(), "a")
	allNil(t, "Claim", lg.Claim(ctx, cs), len(cs))

	other := backendOn(t, mustClient(t), key, nil).Ledger()
	var once sync.Once
	var hookErr error
	ct.setBefore(func(kind string, ops api.TxnOps) *http.Response {
		if kind == "txn-write" {
			once.Do(func() { hookErr = other.Finish(ctx, finishesOf(cs[4:5], ledger.ResultFailed))[0] })
		}
		return nil
	})
	ct.take()
	allNil(t, "Finish", lg.Finish(ctx, finishesOf(cs, ledger.ResultOK)), len(cs))
	ct.setBefore(nil)
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	tripsAre(t, "Finish with one run finished under it", ct.take(), trips{"txn-write": 2, "txn-read": 1})
	for _, job := range jobs {
		if h, err := lg.History(ctx, job, 10); err != nil || len(h) != 1 || h[0].Result != ledger.ResultOK {
			t.Errorf("History(%s) = %+v, %v; want one run, ok (the last Finish)", job, h, err)
		}
	}
}

// TestLedger_FinishOfAnotherTokensRun: a Finish naming another token than
// the one that claimed the run is not applied, whether the Ledger made
// the claim (and remembers its entry) or not.
func TestLedger_FinishOfAnotherTokensRun(t *testing.T) {
	a := sharedAgent(t)
	key := newKey(t)
	c1 := newCandidate(t, a, key)
	ctx := bctx(t)
	l := backendtest.Acquire(t, c1, "a", 30*time.Second)
	defer backendtest.Release(t, l)
	cs := claimsAt([]string{"x", "y"}, batchTick, l.Token(), "a")
	allNil(t, "Claim", c1.Ledger().Claim(ctx, cs), 2)

	wrong := finishesOf(cs, ledger.ResultFailed)
	for i := range wrong {
		wrong[i].Token++
	}
	fresh := backendOn(t, mustClient(t), key, nil).Ledger()
	allNil(t, "Finish with another token (claiming Ledger)", c1.Ledger().Finish(ctx, wrong[:1]), 1)
	allNil(t, "Finish with another token (another Ledger)", fresh.Finish(ctx, wrong[1:]), 1)
	for _, job := range []string{"x", "y"} {
		if h, err := c1.Ledger().History(ctx, job, 10); err != nil || len(h) != 1 || h[0].Result != ledger.ResultRunning {
			t.Errorf("History(%s) after Finish with another token = %+v, %v; want still running", job, h, err)
		}
	}
	// With the right token both apply.
	right := finishesOf(cs, ledger.ResultOK)
	allNil(t, "Finish (claiming Ledger)", c1.Ledger().Finish(ctx, right[:1]), 1)
	allNil(t, "Finish (another Ledger)", fresh.Finish(ctx, right[1:]), 1)
	for _, job := range []string{"x", "y"} {
		if h, err := c1.Ledger().History(ctx, job, 10); err != nil || len(h) != 1 || h[0].Result != ledger.ResultOK {
			t.Errorf("History(%s) after Finish = %+v, %v; want ok", job, h, err)
		}
	}
}

// TestLedger_StaleBeforeTickClaimed: a claim of a tick claimed already,
// by a term that no longer holds, is refused as stale (as the in-memory
// ledger does), even though the Ledger knows the tick is claimed without
// asking Consul.
func TestLedger_StaleBeforeTickClaimed(t *testing.T) {
	a := sharedAgent(t)
	key := newKey(t)
	ca, cb := newCandidate(t, a, key), newCandidate(t, a, key)
	ctx := bctx(t)
	la := backendtest.Acquire(t, ca, "a", 30*time.Second)
	c := ledger.Claim{Job: "j", Tick: batchTick, Token: la.Token(), Instance: "a"}
	allNil(t, "Claim", ca.Ledger().Claim(ctx, []ledger.Claim{c}), 1)
	if err := ca.Ledger().Claim(ctx, []ledger.Claim{c})[0]; !errors.Is(err, ledger.ErrTickClaimed) {
		t.Errorf("the same claim again: %v, want ErrTickClaimed", err)
	}
	backendtest.Release(t, la)
	lb := backendtest.Acquire(t, cb, "b", 30*time.Second)
	defer backendtest.Release(t, lb)
	if err := ca.Ledger().Claim(ctx, []ledger.Claim{c})[0]; !errors.Is(err, ledger.ErrStaleTerm) {
		t.Errorf("the same claim after the term ended: %v, want ErrStaleTerm", err)
	}
}

// TestLedger_DuplicateInOneCall: a second claim (or finish) of the same
// job in one call gets an error of its own and is not sent; the first is
// made.
func TestLedger_DuplicateInOneCall(t *testing.T) {
	a := sharedAgent(t)
	c1 := newCandidate(t, a, newKey(t))
	ctx := bctx(t)
	l := backendtest.Acquire(t, c1, "a", 30*time.Second)
	defer backendtest.Release(t, l)
	cs := claimsAt([]string{"j", "k", "j"}, batchTick, l.Token(), "a")
	cs[2].Tick = batchTick.Add(time.Minute)
	errs := c1.Ledger().Claim(ctx, cs)
	if errs[0] != nil || errs[1] != nil || errs[2] == nil || errors.Is(errs[2], ledger.ErrTickClaimed) || errors.Is(errs[2], ledger.ErrStaleTerm) {
		t.Errorf("Claim of j, k, j = %v; want j and k claimed, the second j refused with an error of its own", errs)
	}
	last, err := c1.Ledger().LastClaimed(ctx, []string{"j"})
	if err != nil || !last[0].Equal(batchTick) {
		t.Errorf("LastClaimed(j) = %v, %v; want %v", last, err, batchTick)
	}
	rs := finishesOf(cs[:2], ledger.ResultOK)
	rs = append(rs, rs[0])
	rs[2].Result = ledger.ResultFailed
	errs = c1.Ledger().Finish(ctx, rs)
	if errs[0] != nil || errs[1] != nil || errs[2] == nil {
		t.Errorf("Finish of j, k, j = %v; want the second j refused", errs)
	}
	if h, _ := c1.Ledger().History(ctx, "j", 10); len(h) != 1 || h[0].Result != ledger.ResultOK {
		t.Errorf("History(j) = %+v, want one run, ok", h)
	}
}

// TestLedger_AgentBefore114: an agent older than Consul 1.14 accepts 64
// operations per transaction, not 128. Its refusal (nothing applied)
// halves the batches, and every claim is made all the same.
func TestLedger_AgentBefore114(t *testing.T) {
	b, lg, ct, ctx := agentBefore114(t)
	l := backendtest.Acquire(t, b, "a", 30*time.Second)
	defer backendtest.Release(t, l)
	jobs := jobNames(3 * lg.MaxBatch())
	cs := claimsAt(jobs, batchTick, l.Token(), "a")
	allNil(t, "Claim", lg.Claim(ctx, cs), len(cs))
	if got := lg.MaxBatch(); got != 63 {
		t.Errorf("MaxBatch() after a refusal = %d, want 63", got)
	}
	if last, err := lg.LastClaimed(ctx, jobs); err != nil || !last[len(jobs)-1].Equal(batchTick) {
		t.Errorf("LastClaimed = %v, %v", last[len(jobs)-1:], err)
	}
	allNil(t, "Finish", lg.Finish(ctx, finishesOf(cs, ledger.ResultOK)), len(cs))
	if ct.maxOps > 64 {
		t.Errorf("a transaction of %d operations reached the agent", ct.maxOps)
	}
	if h, err := lg.History(ctx, jobs[len(jobs)-1], 10); err != nil || len(h) != 1 || h[0].Result != ledger.ResultOK {
		t.Errorf("History = %+v, %v; want one run, ok", h, err)
	}
}

// TestLedger_BatchLatency claims and finishes 1,000 jobs due at the same
// instant as the Host does (a call per MaxBatch, all at once), on a cold
// Ledger and then on a warm one, and logs how long it took; the warm
// instant must stay within a generous bound on a loaded machine.
func TestLedger_BatchLatency(t *testing.T) {
	a := sharedAgent(t)
	b := backendOn(t, agentClient(t, a, "", ""), newKey(t), nil)
	lg := b.Ledger()
	ctx := bctx(t)
	l := backendtest.Acquire(t, b, "a", 30*time.Second)
	defer backendtest.Release(t, l)
	sizes := []int{1000}
	if !testing.Short() {
		sizes = append(sizes, 10000)
	}
	for _, n := range sizes {
		jobs := make([]string, n)
		for i := range jobs {
			jobs[i] = fmt.Sprintf("lat%d-%05d", n, i)
		}
		instant := func(tick time.Time) (claim, finish time.Duration) {
			cs := claimsAt(jobs, tick, l.Token(), "a")
			mb := lg.MaxBatch()
			var wg sync.WaitGroup
			start := time.Now()
			for from := 0; from < n; from += mb {
				part := cs[from:min(from+mb, n)]
				wg.Go(func() { allNil(t, "Claim", lg.Claim(ctx, part), len(part)) })
			}
			wg.Wait()
			claim = time.Since(start)
			start = time.Now()
			for from := 0; from < n; from += mb {
				part := finishesOf(cs[from:min(from+mb, n)], ledger.ResultOK)
				wg.Go(func() { allNil(t, "Finish", lg.Finish(ctx, part), len(part)) })
			}
			wg.Wait()
			return claim, time.Since(start)
		}
		cold, coldFin := instant(batchTick)
		warm, warmFin := instant(batchTick.Add(time.Minute))
		t.Logf("%d jobs: claim %v cold, %v warm; finish %v, %v", n, cold.Round(time.Millisecond), warm.Round(time.Millisecond),
			coldFin.Round(time.Millisecond), warmFin.Round(time.Millisecond))
		if bound := time.Duration(n) * 2 * time.Millisecond; warm > bound {
			t.Errorf("%d claims due at one instant took %v, want under %v even on a loaded machine", n, warm, bound)
		}
	}
}

// TestLedger_AgentBefore114_FinishFirst: on an agent older than Consul
// 1.14, a Finish call whose runs were claimed in small batches is the
// first transaction over 64 operations. Its refusal lowers the limit as
// a claim's does, and every finish is made.
func TestLedger_AgentBefore114_FinishFirst(t *testing.T) {
	b, lg, _, ctx := agentBefore114(t)
	l := backendtest.Acquire(t, b, "a", 30*time.Second)
	defer backendtest.Release(t, l)
	jobs := jobNames(120)
	cs := claimsAt(jobs, batchTick, l.Token(), "a")
	for from := 0; from < len(cs); from += 40 { // 41 operations each: accepted
		part := cs[from:min(from+40, len(cs))]
		allNil(t, "Claim", lg.Claim(ctx, part), len(part))
	}
	if got := lg.MaxBatch(); got != 127 {
		t.Fatalf("MaxBatch() before any refusal = %d, want 127", got)
	}
	allNil(t, "Finish", lg.Finish(ctx, finishesOf(cs, ledger.ResultOK)), len(cs))
	if got := lg.MaxBatch(); got != 63 {
		t.Errorf("MaxBatch() after the finish's refusal = %d, want 63", got)
	}
	for _, j := range []string{jobs[0], jobs[len(jobs)-1]} {
		if h, err := lg.History(ctx, j, 10); err != nil || len(h) != 1 || h[0].Result != ledger.ResultOK {
			t.Errorf("History(%s) = %+v, %v; want one run, ok", j, h, err)
		}
	}
}
