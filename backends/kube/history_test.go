package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/kubetest"
	"github.com/batonhq/baton/ledger"
)

// historyLedger returns a ledger of a new election on the package's
// server, its backend, and a held term's token.
func historyLedger(t *testing.T, ctx context.Context) (*tickLedger, uint64) {
	t.Helper()
	s := kubetest.Shared(t)
	c, err := NewClient(ClientConfig{Server: s.URL, Token: kubetest.Token, CAFile: s.CAFile, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	id := make([]byte, 4)
	rand.Read(id)
	b, err := New(Config{Client: c, Name: "history-" + hex.EncodeToString(id), Timing: election.Timing{TTL: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.Acquire(ctx, election.Identity{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release(context.Background()) })
	return &tickLedger{b: b}, l.Token()
}

// entry reads job's entry in shard (a ConfigMap name).
func entry(t *testing.T, ctx context.Context, l *tickLedger, shard, job string) jobRec {
	t.Helper()
	o, err := l.b.c.get(ctx, configMaps, l.b.ns, shard)
	if isNotFound(err) {
		return jobRec{Job: job}
	}
	if err != nil {
		t.Fatal(err)
	}
	key, _, _ := jobKey(job)
	r, err := record(o.section("data"), key, job)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runTicks claims and finishes ticks from..to-1 (seconds after base) of
// job, each with Error naming its tick.
func runTicks(t *testing.T, ctx context.Context, l *tickLedger, token uint64, job string, base time.Time, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		tick := base.Add(time.Duration(i) * time.Second)
		if err := l.Claim(ctx, []ledger.Claim{{Job: job, Tick: tick, Token: token, Instance: "a", Started: tick}})[0]; err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		run := ledger.Run{Job: job, Tick: tick, Token: token, Instance: "a", Started: tick, Ended: tick.Add(time.Millisecond),
			Result: ledger.ResultFailed, Error: fmt.Sprintf("tick %d", i)}
		if err := l.Finish(ctx, []ledger.Run{run})[0]; err != nil {
			t.Fatalf("finish %d: %v", i, err)
		}
	}
}

// A job's finished runs move from its ledger entry to its history shard,
// so the entry a claim rewrites stays at a few runs, and History still
// shows the newest Config.History runs, each once, newest first, as
// finished.
func TestLedger_RunsMoveToHistory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, token := historyLedger(t, ctx)
	base := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	const job, n = "report", 30
	_, ln, hn := jobKey(job)
	most := 0
	for i := range n {
		runTicks(t, ctx, l, token, job, base, i, i+1)
		most = max(most, len(entry(t, ctx, l, l.b.ledgerShard(ln), job).Runs))
	}
	if most > moveAt(ln) {
		t.Errorf("the ledger entry held up to %d runs, want at most moveAt = %d", most, moveAt(ln))
	}
	if h := entry(t, ctx, l, l.b.historyShard(hn), job); len(h.Runs) == 0 || h.Last != 0 {
		t.Errorf("history shard entry: %d runs, last %d; want runs moved there, no last tick", len(h.Runs), h.Last)
	}
	runs, err := l.History(ctx, job, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != l.b.history {
		t.Fatalf("History(%d) returned %d runs, want the %d kept", n, len(runs), l.b.history)
	}
	for k, r := range runs {
		i := n - 1 - k
		if !r.Tick.Equal(base.Add(time.Duration(i)*time.Second)) || r.Result != ledger.ResultFailed || r.Error != fmt.Sprintf("tick %d", i) {
			t.Errorf("run %d: tick %v, %s %q; want tick %d, failed, %q", k, r.Tick, r.Result, r.Error, i, fmt.Sprintf("tick %d", i))
		}
	}
	if last, err := l.LastClaimed(ctx, []string{job}); err != nil || !last[0].Equal(base.Add((n-1)*time.Second)) {
		t.Errorf("LastClaimed %v, %v; want tick %d", last, err, n-1)
	}
}

// A finish of a run that has moved (a retried Finish) updates it in the
// history shard. And a move that stopped between its two writes, or met
// a run finished again meanwhile, leaves a run in both shards: History
// shows it once, as the ledger entry has it.
func TestLedger_FinishAfterMoveAndRunInBoth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, token := historyLedger(t, ctx)
	base := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	const job = "sync"
	_, ln, hn := jobKey(job)
	runTicks(t, ctx, l, token, job, base, 0, moveAt(ln)+1)
	if h := entry(t, ctx, l, l.b.historyShard(hn), job); len(h.Runs) == 0 || h.Runs[len(h.Runs)-1].Tick != base.UnixNano() {
		t.Fatalf("tick 0 was not moved: history shard entry %+v", h)
	}
	again := ledger.Run{Job: job, Tick: base, Token: token, Instance: "a", Started: base, Ended: base.Add(time.Second), Result: ledger.ResultOK}
	if err := l.Finish(ctx, []ledger.Run{again})[0]; err != nil {
		t.Fatal(err)
	}
	runs, err := l.History(ctx, job, 100)
	if err != nil {
		t.Fatal(err)
	}
	if r := runs[len(runs)-1]; !r.Tick.Equal(base) || r.Result != ledger.ResultOK || r.Error != "" {
		t.Errorf("tick 0 after its finish again: %v %s %q, want ok", r.Tick, r.Result, r.Error)
	}

	// The history shard gets a stale copy of the newest run (as a move
	// that read the entry before its last finish would write it); the
	// removal finds the entry's copy changed and keeps it.
	newest := entry(t, ctx, l, l.b.ledgerShard(ln), job).Runs[0]
	stale := newest
	stale.Result, stale.Error, stale.Ended = string(ledger.ResultRunning), "", 0
	key, _, _ := jobKey(job)
	if err := l.move(ctx, ln, map[int]map[string]jobRec{hn: {key: {Job: job, Runs: []runRec{stale}}}}, false); err != nil {
		t.Fatal(err)
	}
	if rs := entry(t, ctx, l, l.b.ledgerShard(ln), job).Runs; len(rs) == 0 || rs[0] != newest {
		t.Fatalf("the move removed the entry's newer copy: entry runs %+v", rs)
	}
	runs, err = l.History(ctx, job, 100)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range runs {
		if r.Tick.UnixNano() == newest.Tick {
			seen++
			if r.Result != ledger.ResultFailed {
				t.Errorf("the run in both shards reads %s, want the ledger entry's failed", r.Result)
			}
		}
	}
	if seen != 1 || len(runs) != moveAt(ln)+1 {
		t.Errorf("History: the run in both shards %d times, %d runs; want once, %d runs", seen, len(runs), moveAt(ln)+1)
	}
}

// A full ledger shard (past half its bound) moves every finished run but
// the newest, whatever moveAt says.
func TestMovable(t *testing.T) {
	r := jobRec{Job: "j", Runs: []runRec{{Tick: 3, Result: "ok"}, {Tick: 2, Result: "running"}, {Tick: 1, Result: "failed"}}}
	if m := movable(r, 0, false); m != nil {
		t.Errorf("3 runs, moveAt %d: moved %v, want none", moveAt(0), m)
	}
	if m := movable(r, 0, true); len(m) != 1 || m[0].Tick != 1 {
		t.Errorf("full shard: moved %v, want the finished run after the newest (tick 1)", m)
	}
	r.Runs = append(r.Runs, runRec{Tick: 0, Result: "ok"})
	if m := movable(r, 0, false); len(m) != 2 || m[0].Tick != 1 || m[1].Tick != 0 {
		t.Errorf("4 runs, moveAt %d: moved %v, want ticks 1 and 0", moveAt(0), m)
	}
}
