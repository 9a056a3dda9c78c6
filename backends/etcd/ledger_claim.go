package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/ledger"
)

// claimReq is one claim of a call, ready to send.
type claimReq struct {
	i    int // its index in the call's claims
	c    ledger.Claim
	ns   int64  // c.Tick in unix nanoseconds
	tick string // the same, formatted for keys and values
	val  string // JSON of its run entry
	size int    // estimated bytes of its operations
}

func (r claimReq) stale(why string) error {
	return fmt.Errorf("etcd: claim %s at %v with token %d: %s: %w", r.c.Job, r.c.Tick, r.c.Token, why, ledger.ErrStaleTerm)
}

func (r claimReq) fail(err error) error {
	return fmt.Errorf("etcd: claim %s at %v: %w", r.c.Job, r.c.Tick, err)
}

// Claim implements ledger.Ledger. The claims of each term (the caller
// passes one) go in batches of MaxBatch, each batch one transaction,
// the batches at once. A transaction compares the create revision of
// the term's key (the election's oldest key when the term's first claim
// looked it up; it stays the oldest while it exists) with the token:
// when it differs, every claim of the batch is refused with an error
// wrapping ledger.ErrStaleTerm. Otherwise each claim's own transaction,
// nested in the batch's, checks that the tick is after the job's last
// claimed one, and if so stores it as the last, puts a "running" run
// entry, deletes the run entries the job's previous claim found beyond
// Config.History, and reads the count and the two oldest of the job's
// run entries (which tell what its next claim deletes). A job claimed
// twice in one call has its later claim refused, unsent.
func (l *tickLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	errs := make([]error, len(cs))
	terms := map[uint64][]claimReq{}
	var tokens []uint64
	sent := map[string]int{} // job -> index of its claim in cs
	for i, c := range cs {
		req, err := l.claimReq(i, c)
		if err == nil {
			if j, dup := sent[c.Job]; dup {
				err = fmt.Errorf("etcd: claim %s at %v: not sent: claim %d of the same call is of the same job", c.Job, c.Tick, j)
			}
		}
		if err != nil {
			errs[i] = err
			continue
		}
		sent[c.Job] = i
		if _, ok := terms[c.Token]; !ok {
			tokens = append(tokens, c.Token)
		}
		terms[c.Token] = append(terms[c.Token], req)
	}
	each(len(tokens), func(t int) { l.claimTerm(ctx, terms[tokens[t]], errs) })
	return ledger.MarkRefused(errs, denied)
}

// claimReq checks and encodes c, the i-th claim of a call.
func (l *tickLedger) claimReq(i int, c ledger.Claim) (claimReq, error) {
	if c.Job == "" {
		return claimReq{}, errors.New("etcd: claim: empty job name")
	}
	tick, err := tickKey(c.Tick)
	if err != nil {
		return claimReq{}, fmt.Errorf("etcd: claim %s: %w", c.Job, err)
	}
	val, err := json.Marshal(ledger.Run{
		Job: c.Job, Tick: c.Tick.UTC(), Instance: c.Instance, Token: c.Token,
		CatchUp: c.CatchUp, Started: c.Started, Result: ledger.ResultRunning,
	})
	if err != nil {
		return claimReq{}, fmt.Errorf("etcd: claim %s: encode run: %w", c.Job, err)
	}
	// Keys: "last" 4 times, the runs prefix 5 times, plus a tick or two
	// and the value; 100 bytes of framing is generous.
	size := 4*len(l.lastKey(c.Job)) + 5*len(l.runsPrefix(c.Job)) + 3*len(tick) + len(val) + 100
	return claimReq{i: i, c: c, ns: c.Tick.UnixNano(), tick: tick, val: string(val), size: size}, nil
}

// claimTerm claims reqs, all of one token, in batches sent at once, and
// sets their errors in errs.
func (l *tickLedger) claimTerm(ctx context.Context, reqs []claimReq, errs []error) {
	token := reqs[0].c.Token
	key, err := l.termKey(ctx, token)
	if err != nil || key == "" {
		for _, r := range reqs {
			if err != nil {
				errs[r.i] = r.fail(fmt.Errorf("find the key of term %d: %w", token, err))
			} else {
				errs[r.i] = r.stale("no leader key with that create revision")
			}
		}
		return
	}
	parts := spans(len(reqs), l.batch, func(i int) int { return reqs[i].size })
	each(len(parts), func(p int) { l.claimBatch(ctx, key, reqs[parts[p].from:parts[p].to], errs) })
}

// termKey returns the key of the term with token, or "" if token is
// not the create revision of the election's oldest candidate key (that
// term is over, or is not one yet). The key of the last token asked is
// kept: it never changes, and the transactions compare its create
// revision anyway.
func (l *tickLedger) termKey(ctx context.Context, token uint64) (string, error) {
	l.mu.Lock()
	key := l.term.key
	if l.term.token != token {
		key = ""
	}
	l.mu.Unlock()
	if key != "" {
		return key, nil
	}
	cands, err := l.b.candidates(ctx, false)
	if err != nil {
		return "", err
	}
	var first *candidate
	for i, c := range cands {
		if first == nil || c.kv.CreateRevision < first.kv.CreateRevision {
			first = &cands[i]
		}
	}
	if first == nil || uint64(first.kv.CreateRevision) != token {
		return "", nil
	}
	key = string(first.kv.Key)
	l.mu.Lock()
	l.term.token, l.term.key = token, key
	l.mu.Unlock()
	return key, nil
}

// claimOp is the transaction of one claim: refused (reading the last
// claimed tick) if the job has one and it is not before r's, recorded
// otherwise. trim is the tick of the newest old run entry to delete with
// the record ("" for none); it is before r's tick, so the delete does
// not cover the put (etcd refuses a transaction where it would).
func (l *tickLedger) claimOp(r claimReq, trim string) clientv3.Op {
	last, runs := l.lastKey(r.c.Job), l.runsPrefix(r.c.Job)
	refuse := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(last), ">", 0)}
	if r.ns > 0 { // last >= tick, as last > tick - 1ns; any last is >= 0
		refuse = append(refuse, clientv3.Compare(clientv3.Value(last), ">", formatTick(r.ns-1)))
	}
	record := make([]clientv3.Op, 0, claimOps)
	if trim != "" {
		record = append(record, clientv3.OpDelete(runs, clientv3.WithRange(runs+trim+"\x00")))
	}
	record = append(record,
		clientv3.OpPut(last, r.tick),
		clientv3.OpPut(runs+r.tick, r.val),
		// After the writes above: it sees them. Ascending key order
		// with a limit is served from the index, without the values.
		clientv3.OpGet(runs, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(2)))
	return clientv3.OpTxn(refuse, []clientv3.Op{clientv3.OpGet(last)}, record)
}

// overJob is a job whose claim left more run entries than History + 1.
type overJob struct {
	job    string
	excess int64 // entries beyond History the claim saw
}

// claimBatch claims reqs in one transaction conditioned on the term's
// key, and sets their errors in errs.
func (l *tickLedger) claimBatch(ctx context.Context, key string, reqs []claimReq, errs []error) {
	token := reqs[0].c.Token
	ops := make([]clientv3.Op, len(reqs))
	l.mu.Lock()
	for k, r := range reqs {
		trim := ""
		if js := l.jobs[r.c.Job]; js != nil && js.trim < r.tick {
			trim = js.trim
		}
		ops[k] = l.claimOp(r, trim)
	}
	l.mu.Unlock()
	resp, err := l.b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", int64(token))).
		Then(ops...).
		Commit()
	if err != nil {
		for _, r := range reqs {
			errs[r.i] = r.fail(err)
		}
		return
	}
	if !resp.Succeeded {
		for _, r := range reqs {
			errs[r.i] = r.stale(fmt.Sprintf("leader key %s gone", key))
		}
		return
	}
	var over []overJob
	for k, r := range reqs {
		var inner *pb.TxnResponse
		if k < len(resp.Responses) {
			inner = resp.Responses[k].GetResponseTxn()
		}
		if inner == nil || len(inner.Responses) == 0 {
			errs[r.i] = r.fail(fmt.Errorf("no response %d of %d in the batch's", k, len(reqs)))
			continue
		}
		if inner.Succeeded {
			lastTick := "?"
			if kvs := inner.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
				lastTick = parseTick(string(kvs[0].Value)).Format(time.RFC3339Nano)
			}
			errs[r.i] = fmt.Errorf("etcd: claim %s at %v (last claimed %s): %w", r.c.Job, r.c.Tick, lastTick, ledger.ErrTickClaimed)
			continue
		}
		runs := inner.Responses[len(inner.Responses)-1].GetResponseRange()
		if excess := l.recorded(r, resp.Header.Revision, runs); excess > 1 {
			over = append(over, overJob{r.c.Job, excess})
		}
	}
	if len(over) > 0 {
		l.trimNow(ctx, over)
	}
}

// recorded notes a recorded claim r: its revision, and what the job's
// next claim deletes, from runs, the count and the two oldest of the
// job's run entries after it. It returns how many entries the job has
// beyond History: more than one are deleted at once (trimNow), one by
// the next claim.
func (l *tickLedger) recorded(r claimReq, rev int64, runs *pb.RangeResponse) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	js := l.state(r.c.Job)
	if len(js.pending) == maxPending {
		copy(js.pending, js.pending[1:])
		js.pending = js.pending[:maxPending-1]
	}
	js.pending = append(js.pending, claimRev{tick: r.tick, token: r.c.Token, rev: rev})
	js.trim = ""
	excess := runs.GetCount() - int64(l.keep)
	if kvs := runs.GetKvs(); excess >= 0 && excess < int64(len(kvs)) {
		js.trim = strings.TrimPrefix(string(kvs[excess].Key), l.runsPrefix(r.c.Job))
	}
	return excess
}

// trimNow deletes the run entries of jobs beyond History: a
// transaction reads the oldest of each, another deletes them. It only
// logs a failure: the claims are recorded, the next ones try again.
func (l *tickLedger) trimNow(ctx context.Context, over []overJob) {
	reads := make([]clientv3.Op, len(over))
	for k, o := range over {
		reads[k] = clientv3.OpGet(l.runsPrefix(o.job), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(o.excess+1))
	}
	resp, err := l.b.cli.Txn(ctx).Then(reads...).Commit()
	if err != nil {
		l.b.log.Warn("reading ledger history to trim", "jobs", len(over), "first", over[0].job, "err", err)
		return
	}
	var dels []clientv3.Op
	l.mu.Lock()
	for k, o := range over {
		if k >= len(resp.Responses) {
			break
		}
		rr := resp.Responses[k].GetResponseRange()
		runs, kvs := l.runsPrefix(o.job), rr.GetKvs()
		excess := rr.GetCount() - int64(l.keep)
		drop := min(max(excess, 0), int64(len(kvs))) // the oldest drop entries go now
		if drop > 0 {
			dels = append(dels, clientv3.OpDelete(runs, clientv3.WithRange(string(kvs[drop-1].Key)+"\x00")))
		}
		// The entry after them is the History-th newest: the next claim
		// deletes it. If some are left beyond History (more were
		// claimed meanwhile), the next claim sees them.
		js := l.state(o.job)
		js.trim = ""
		if excess == drop && drop < int64(len(kvs)) {
			js.trim = strings.TrimPrefix(string(kvs[drop].Key), runs)
		}
	}
	l.mu.Unlock()
	if len(dels) == 0 {
		return
	}
	if _, err := l.b.cli.Txn(ctx).Then(dels...).Commit(); err != nil {
		l.b.log.Warn("trimming ledger history", "jobs", len(dels), "first", over[0].job, "err", err)
	}
}
