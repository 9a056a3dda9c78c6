package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/ledger"
)

// Ledger returns the election's tick ledger, keeping the newest
// Config.History runs per job. Its keys are under PREFIX + "-ledger/",
// outside the election:
//
//	PREFIX-ledger/<job, path-escaped>/last                    newest claimed tick, unix nanoseconds, 20 digits
//	PREFIX-ledger/<job, path-escaped>/runs/<tick, same form>  JSON of ledger.Run
//
// A claim is one transaction, conditioned on the claiming term's key
// still having the term's token as its create revision; it can only be
// made with a token this Backend handed out and has not released. The
// ledger may be used from several goroutines at once.
func (b *Backend) Ledger() ledger.Ledger {
	return &tickLedger{b: b, root: b.prefix + "-ledger/", keep: b.history}
}

type tickLedger struct {
	b    *Backend
	root string
	keep int
}

var _ ledger.Ledger = (*tickLedger)(nil)

// tickKey formats t as fixed-width unix nanoseconds, so that the byte
// order of keys and values is the order of time.
func tickKey(t time.Time) (string, error) {
	ns := t.UnixNano()
	if ns < 0 {
		return "", fmt.Errorf("tick %v: before 1970", t)
	}
	return fmt.Sprintf("%020d", ns), nil
}

func (l *tickLedger) jobPrefix(job string) string { return l.root + url.PathEscape(job) + "/" }
func (l *tickLedger) lastKey(job string) string   { return l.jobPrefix(job) + "last" }
func (l *tickLedger) runsPrefix(job string) string {
	return l.jobPrefix(job) + "runs/"
}

// Claim implements ledger.Ledger. It reads the election's oldest
// key, the leader's: if its create revision is not c.Token, the term is
// over. Then, in one transaction, it checks that this key still exists
// with create revision c.Token, that c.Tick is after the job's last
// claimed tick, and stores the tick and a "running" run entry. When the
// term's key is gone it returns an error wrapping
// ledger.ErrStaleTerm (the Host then ends the term). When
// the job has more than the kept number of runs, the oldest are deleted in
// a second request after the claim.
func (l *tickLedger) Claim(ctx context.Context, c ledger.Claim) error {
	if c.Job == "" {
		return errors.New("etcd: claim: empty job name")
	}
	tick, err := tickKey(c.Tick)
	if err != nil {
		return fmt.Errorf("etcd: claim %s: %w", c.Job, err)
	}
	stale := func(why string) error {
		return fmt.Errorf("etcd: claim %s at %v with token %d: %s: %w", c.Job, c.Tick, c.Token, why, ledger.ErrStaleTerm)
	}
	key, err := l.leaderKey(ctx, c.Token)
	if err != nil {
		return fmt.Errorf("etcd: claim %s at %v: %w", c.Job, c.Tick, err)
	}
	if key == "" {
		return stale("no leader key with that create revision")
	}
	val, err := json.Marshal(ledger.Run{
		Job: c.Job, Tick: c.Tick.UTC(), Instance: c.Instance, Token: c.Token,
		CatchUp: c.CatchUp, Started: c.Started, Result: ledger.ResultRunning,
	})
	if err != nil {
		return fmt.Errorf("etcd: claim %s: encode run: %w", c.Job, err)
	}
	last, runs := l.lastKey(c.Job), l.runsPrefix(c.Job)
	record := []clientv3.Op{
		clientv3.OpPut(last, tick),
		clientv3.OpPut(runs+tick, string(val)),
		clientv3.OpGet(runs, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(l.keep+1))),
	}
	// A value compare fails on a missing key, hence two levels: first
	// claim of the job, or a tick after the last one.
	newer := clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(last), "<", tick)},
		record,
		[]clientv3.Op{clientv3.OpGet(last)})
	claim := clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(last), "=", 0)},
		record,
		[]clientv3.Op{newer})
	resp, err := l.b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", int64(c.Token))).
		Then(claim).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd: claim %s at %v: %w", c.Job, c.Tick, err)
	}
	if !resp.Succeeded {
		return stale(fmt.Sprintf("leader key %s gone", key))
	}
	inner := resp.Responses[0].GetResponseTxn()
	if !inner.Succeeded {
		inner = inner.Responses[0].GetResponseTxn()
		if !inner.Succeeded {
			lastTick := "?"
			if kvs := inner.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
				lastTick = parseTick(string(kvs[0].Value)).Format(time.RFC3339Nano)
			}
			return fmt.Errorf("etcd: claim %s at %v (last claimed %s): %w", c.Job, c.Tick, lastTick, ledger.ErrTickClaimed)
		}
	}
	if kvs := inner.Responses[2].GetResponseRange().GetKvs(); len(kvs) > l.keep {
		oldest := string(kvs[l.keep].Key)
		if _, err := l.b.cli.Delete(ctx, runs, clientv3.WithRange(oldest+"\x00")); err != nil {
			l.b.log.Warn("pruning ledger history", "job", c.Job, "err", err)
		}
	}
	return nil
}

func parseTick(s string) time.Time {
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// leaderKey returns the election's oldest key, the leader's, if its create
// revision is token, or "" if it is not (or there is none): while a term
// holds, its key is the oldest, since every key created before it is gone.
func (l *tickLedger) leaderKey(ctx context.Context, token uint64) (string, error) {
	resp, err := l.b.cli.Get(ctx, l.b.keys, clientv3.WithFirstCreate()...)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 || uint64(resp.Kvs[0].CreateRevision) != token {
		return "", nil
	}
	return string(resp.Kvs[0].Key), nil
}

// LastClaimed implements ledger.Ledger.
func (l *tickLedger) LastClaimed(ctx context.Context, job string) (time.Time, error) {
	resp, err := l.b.cli.Get(ctx, l.lastKey(job))
	if err != nil {
		return time.Time{}, fmt.Errorf("etcd: last claimed tick of %s: %w", job, err)
	}
	if len(resp.Kvs) == 0 {
		return time.Time{}, nil
	}
	t := parseTick(string(resp.Kvs[0].Value))
	if t.IsZero() {
		return time.Time{}, fmt.Errorf("etcd: last claimed tick of %s: bad value %q", job, resp.Kvs[0].Value)
	}
	return t, nil
}

// Finish implements ledger.Ledger: it replaces the run entry of
// r.Job at r.Tick with r, if that entry was claimed with r.Token. It
// returns an error if there is no such entry (never claimed, or pruned).
func (l *tickLedger) Finish(ctx context.Context, r ledger.Run) error {
	tick, err := tickKey(r.Tick)
	if err != nil {
		return fmt.Errorf("etcd: finish %s: %w", r.Job, err)
	}
	key := l.runsPrefix(r.Job) + tick
	r.Tick = r.Tick.UTC()
	val, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("etcd: finish %s: encode run: %w", r.Job, err)
	}
	for range 3 { // compare-and-swap; retried only if the entry changed meanwhile
		resp, err := l.b.cli.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("etcd: finish %s at %v: %w", r.Job, r.Tick, err)
		}
		if len(resp.Kvs) == 0 {
			return nil // trimmed from the history already: nothing to update
		}
		var cur ledger.Run
		if err := json.Unmarshal(resp.Kvs[0].Value, &cur); err != nil {
			return fmt.Errorf("etcd: finish %s at %v: decode run entry: %w", r.Job, r.Tick, err)
		}
		if cur.Token != r.Token {
			return fmt.Errorf("etcd: finish %s at %v: run entry has token %d, not %d", r.Job, r.Tick, cur.Token, r.Token)
		}
		tr, err := l.b.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, string(val))).
			Commit()
		if err != nil {
			return fmt.Errorf("etcd: finish %s at %v: %w", r.Job, r.Tick, err)
		}
		if tr.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("etcd: finish %s at %v: run entry keeps changing", r.Job, r.Tick)
}

// History implements ledger.Ledger, newest first.
func (l *tickLedger) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	if n <= 0 {
		return nil, nil
	}
	resp, err := l.b.cli.Get(ctx, l.runsPrefix(job), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(n)))
	if err != nil {
		return nil, fmt.Errorf("etcd: history of %s: %w", job, err)
	}
	runs := make([]ledger.Run, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r ledger.Run
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("etcd: history of %s: decode %s: %w", job, kv.Key, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}
