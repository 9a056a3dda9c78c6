package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonhq/baton/ledger"
)

// finishReq is one run of a Finish call, ready to send.
type finishReq struct {
	i   int // its index in the call's runs
	r   ledger.Run
	key string // its run entry
	val string
	rev int64 // revision at which this Ledger's claim put the entry; 0 if unknown
}

func (f finishReq) fail(err error) error {
	return fmt.Errorf("etcd: finish %s at %v: %w", f.r.Job, f.r.Tick, err)
}

func (f finishReq) size() int { return 3*len(f.key) + len(f.val) + 50 }

// finishRounds bounds the compare-and-swaps of a run whose entry keeps
// changing between the read and the write.
const finishRounds = 3

// Finish implements ledger.Ledger: it replaces the run entry of each
// run's Job at its Tick with the run, if that entry was claimed with
// the run's Token; if there is no such entry (never claimed, or
// trimmed), it does nothing and returns nil for that run. The runs this
// Ledger claimed go in batches of MaxBatch, one transaction each, every
// put conditioned on the entry's mod revision still being the one the
// claim put it at. The others, and those whose entry changed since,
// are read first, one transaction per batch, then written the same way,
// conditioned on the revision read. The batches go at once. A run
// finished twice in one call has its later finish refused, unsent.
func (l *tickLedger) Finish(ctx context.Context, rs []ledger.Run) []error {
	errs := make([]error, len(rs))
	var known, unknown []finishReq
	sent := map[string]int{} // run key -> index of its run in rs
	for i, r := range rs {
		tick, err := tickKey(r.Tick)
		if err != nil {
			errs[i] = fmt.Errorf("etcd: finish %s: %w", r.Job, err)
			continue
		}
		key := l.runsPrefix(r.Job) + tick
		if j, dup := sent[key]; dup {
			errs[i] = fmt.Errorf("etcd: finish %s at %v: not sent: run %d of the same call is the same run", r.Job, r.Tick, j)
			continue
		}
		r.Tick = r.Tick.UTC()
		val, err := json.Marshal(r)
		if err != nil {
			errs[i] = fmt.Errorf("etcd: finish %s at %v: encode run: %w", r.Job, r.Tick, err)
			continue
		}
		sent[key] = i
		f := finishReq{i: i, r: r, key: key, val: string(val), rev: l.takeRev(r.Job, tick, r.Token)}
		if f.rev != 0 {
			known = append(known, f)
		} else {
			unknown = append(unknown, f)
		}
	}
	parts := spans(len(known), l.batch, func(i int) int { return known[i].size() })
	changed := make([][]finishReq, len(parts))
	each(len(parts), func(p int) { changed[p] = l.finishKnown(ctx, known[parts[p].from:parts[p].to], errs) })
	for _, c := range changed {
		unknown = append(unknown, c...)
	}
	parts = spans(len(unknown), l.batch, func(i int) int { return unknown[i].size() })
	each(len(parts), func(p int) { l.finishRead(ctx, unknown[parts[p].from:parts[p].to], errs) })
	return ledger.MarkRefused(errs, denied)
}

// takeRev returns, and forgets, the revision at which this Ledger's
// claim of job at tick with token put its run entry; 0 if it has none.
func (l *tickLedger) takeRev(job, tick string, token uint64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	js := l.jobs[job]
	if js == nil {
		return 0
	}
	for k, p := range js.pending {
		if p.tick == tick && p.token == token {
			js.pending = append(js.pending[:k], js.pending[k+1:]...)
			return p.rev
		}
	}
	return 0 // not a run of ours: the read finds whose it is
}

// cas is the transaction that puts f's entry if its mod revision is rev.
func (f finishReq) cas(rev int64) clientv3.Op {
	return clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(f.key), "=", rev)},
		[]clientv3.Op{clientv3.OpPut(f.key, f.val)},
		nil)
}

// finishKnown writes fs, whose revisions are known, in one transaction,
// sets their errors in errs and returns those whose entry changed (or
// is gone) since.
func (l *tickLedger) finishKnown(ctx context.Context, fs []finishReq, errs []error) []finishReq {
	ops := make([]clientv3.Op, len(fs))
	for k, f := range fs {
		ops[k] = f.cas(f.rev)
	}
	resp, err := l.b.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		for _, f := range fs {
			errs[f.i] = f.fail(err)
		}
		return nil
	}
	var changed []finishReq
	for k, f := range fs {
		if k >= len(resp.Responses) || !resp.Responses[k].GetResponseTxn().GetSucceeded() {
			changed = append(changed, f)
		}
	}
	return changed
}

// finishRead reads the entries of fs in one transaction and writes
// those with the runs' tokens in another, conditioned on the revisions
// read; it tries again those changed meanwhile, and sets the errors of
// fs in errs.
func (l *tickLedger) finishRead(ctx context.Context, fs []finishReq, errs []error) {
	for round := 0; len(fs) > 0; round++ {
		if round == finishRounds {
			for _, f := range fs {
				errs[f.i] = f.fail(fmt.Errorf("run entry keeps changing"))
			}
			return
		}
		reads := make([]clientv3.Op, len(fs))
		for k, f := range fs {
			reads[k] = clientv3.OpGet(f.key)
		}
		resp, err := l.b.cli.Txn(ctx).Then(reads...).Commit()
		if err != nil {
			for _, f := range fs {
				errs[f.i] = f.fail(err)
			}
			return
		}
		var put []finishReq
		var ops []clientv3.Op
		for k, f := range fs {
			if k >= len(resp.Responses) {
				errs[f.i] = f.fail(fmt.Errorf("no response %d of %d in the batch's", k, len(fs)))
				continue
			}
			kvs := resp.Responses[k].GetResponseRange().GetKvs()
			if len(kvs) == 0 {
				errs[f.i] = nil // trimmed from the history, or never claimed: nothing to update
				continue
			}
			var cur ledger.Run
			if err := json.Unmarshal(kvs[0].Value, &cur); err != nil {
				errs[f.i] = f.fail(fmt.Errorf("decode run entry: %w", err))
				continue
			}
			if cur.Token != f.r.Token {
				errs[f.i] = f.fail(fmt.Errorf("run entry has token %d, not %d", cur.Token, f.r.Token))
				continue
			}
			put = append(put, f)
			ops = append(ops, f.cas(kvs[0].ModRevision))
		}
		if len(ops) == 0 {
			return
		}
		tr, err := l.b.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			for _, f := range put {
				errs[f.i] = f.fail(err)
			}
			return
		}
		fs = fs[:0:0]
		for k, f := range put {
			if k < len(tr.Responses) && tr.Responses[k].GetResponseTxn().GetSucceeded() {
				errs[f.i] = nil
			} else {
				fs = append(fs, f)
			}
		}
	}
}

// denied reports whether the server refused the caller: a permission
// denied by etcd's auth, or a token it does not accept.
func denied(err error) bool {
	for _, e := range []error{rpctypes.ErrPermissionDenied, rpctypes.ErrInvalidAuthToken, rpctypes.ErrUserEmpty,
		rpctypes.ErrAuthFailed, rpctypes.ErrInvalidAuthMgmt} {
		if errors.Is(err, e) {
			return true
		}
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		switch se.GRPCStatus().Code() {
		case codes.PermissionDenied, codes.Unauthenticated:
			return true
		}
	}
	return false
}
