package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
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
// A job holds 1 + History keys: "last", of len(PREFIX) + len(job
// escaped) + 13 bytes with a 20-byte value, and one run entry per kept
// run, of len(PREFIX) + len(job escaped) + 34 bytes with 130 bytes of
// JSON (170 once finished) plus the job's name, the instance and the
// error text. A claim through a Ledger that has not claimed the job
// before may leave one run entry more, until the job's next claim.
//
// One transaction carries a batch of up to MaxBatch claims
// (Config.MaxTxnOps - 4, 124 by default), conditioned on the claiming
// term's key still having the term's token as its create revision; it
// can only be made with a token this Backend handed out and has not
// released. A Finish of runs this Ledger claimed is one transaction per
// MaxBatch runs too; LastClaimed reads Config.MaxTxnOps jobs per
// transaction. The batches of one call go out at once.
//
// Keep one Ledger per process: each caches the key of the term it last
// claimed with (found with one read of the election's candidates, at
// the first claim with a token) and, per job, for at most 16,384 jobs
// of a few hundred bytes each: which old run entries its next claim
// deletes, and the revisions of its claims not finished yet (at most 8).
// Without them it reads what it needs first: a Finish of runs it did
// not claim (or whose revision it dropped) costs a read and a write per
// batch, and a claim that finds more than History + 1 run entries (two
// claims in a row through Ledgers new to the job, or History lowered)
// costs a read and a delete after it. Otherwise a claim's transaction
// itself deletes the runs beyond History. The ledger may be used from
// several goroutines at once.
func (b *Backend) Ledger() ledger.Ledger {
	return &tickLedger{
		b:     b,
		root:  b.prefix + "-ledger/",
		keep:  b.history,
		batch: b.txnOps - claimOps,
		reads: b.txnOps,
		jobs:  make(map[string]*jobState),
	}
}

// Bounds of a tickLedger's caches and requests.
const (
	maxCachedJobs = 1 << 14 // jobs a tickLedger keeps a jobState of
	maxPending    = 8       // unfinished claims a jobState keeps the revision of
	// maxTxnBytes bounds the estimated size of one transaction: etcd
	// refuses a request larger than its --max-request-bytes, 1.5 MiB by
	// default. A batch that would exceed it (runs with long error texts)
	// is split further.
	maxTxnBytes = 1 << 20
)

type tickLedger struct {
	b     *Backend
	root  string
	keep  int // runs kept per job
	batch int // claims or finishes per transaction
	reads int // reads per transaction

	mu   sync.Mutex
	term struct { // the term last claimed with
		token uint64
		key   string // its candidate key, whose create revision is token
	}
	jobs map[string]*jobState
}

// jobState is what a tickLedger remembers of one job.
type jobState struct {
	// trim is the tick of the newest run entry that the job's next
	// recorded claim deletes, with every older one ("" for none): the
	// oldest of the History newest entries seen after the last claim,
	// which is one too many once the claim adds its own. Deleting up to
	// such a tick is safe however old it is: the entries newer than it
	// stay (run keys only grow), and with the claim's there are History.
	trim string
	// pending are this Ledger's recorded claims not finished yet, oldest
	// first.
	pending []claimRev
}

// claimRev is a recorded claim and the revision at which its run entry
// was put.
type claimRev struct {
	tick  string
	token uint64
	rev   int64
}

var _ ledger.Ledger = (*tickLedger)(nil)

// MaxBatch implements ledger.Ledger: Config.MaxTxnOps - 4. etcd counts
// a transaction's operations per level of nesting, each level against
// what the levels above leave of --max-txn-ops: a batch of n claims
// holds n operations, each a transaction of 4.
func (l *tickLedger) MaxBatch() int { return l.batch }

// tickKey formats t as fixed-width unix nanoseconds, so that the byte
// order of keys and values is the order of time.
func tickKey(t time.Time) (string, error) {
	ns := t.UnixNano()
	if ns < 0 {
		return "", fmt.Errorf("tick %v: before 1970", t)
	}
	return formatTick(ns), nil
}

func formatTick(ns int64) string { return fmt.Sprintf("%020d", ns) }

func parseTick(s string) time.Time {
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func (l *tickLedger) jobPrefix(job string) string { return l.root + url.PathEscape(job) + "/" }
func (l *tickLedger) lastKey(job string) string   { return l.jobPrefix(job) + "last" }
func (l *tickLedger) runsPrefix(job string) string {
	return l.jobPrefix(job) + "runs/"
}

// span is the items [from, to) of a batch.
type span struct{ from, to int }

// spans splits n items into spans of at most max items whose sizes add
// up to at most maxTxnBytes (an item larger than that alone).
func spans(n, max int, size func(i int) int) []span {
	var out []span
	for from := 0; from < n; {
		to, bytes := from, 0
		for to < n && to-from < max {
			s := size(to)
			if to > from && bytes+s > maxTxnBytes {
				break
			}
			bytes += s
			to++
		}
		out = append(out, span{from, to})
		from = to
	}
	return out
}

// each calls f(i) for every i < n, at once, and returns when all have.
func each(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// state returns job's jobState, made if it has none; l.mu is held. When
// the cache is full, another job's is dropped.
func (l *tickLedger) state(job string) *jobState {
	js := l.jobs[job]
	if js == nil {
		if len(l.jobs) >= maxCachedJobs {
			for other := range l.jobs {
				delete(l.jobs, other)
				break
			}
		}
		js = &jobState{}
		l.jobs[job] = js
	}
	return js
}

// LastClaimed implements ledger.Ledger: Config.MaxTxnOps jobs per
// transaction of reads, the transactions at once.
func (l *tickLedger) LastClaimed(ctx context.Context, jobs []string) ([]time.Time, error) {
	out := make([]time.Time, len(jobs))
	parts := spans(len(jobs), l.reads, func(int) int { return 0 })
	errs := make([]error, len(parts))
	each(len(parts), func(p int) {
		errs[p] = l.lastClaimed(ctx, jobs[parts[p].from:parts[p].to], out[parts[p].from:parts[p].to])
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// lastClaimed reads the last claimed tick of each of jobs into out, in
// one transaction.
func (l *tickLedger) lastClaimed(ctx context.Context, jobs []string, out []time.Time) error {
	ops := make([]clientv3.Op, len(jobs))
	for i, job := range jobs {
		ops[i] = clientv3.OpGet(l.lastKey(job))
	}
	resp, err := l.b.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("etcd: last claimed ticks of %d jobs (%s...): %w", len(jobs), jobs[0], err)
	}
	if len(resp.Responses) != len(jobs) {
		return fmt.Errorf("etcd: last claimed ticks of %d jobs (%s...): %d responses", len(jobs), jobs[0], len(resp.Responses))
	}
	for i, job := range jobs {
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue
		}
		t := parseTick(string(kvs[0].Value))
		if t.IsZero() {
			return fmt.Errorf("etcd: last claimed tick of %s: bad value %q", job, kvs[0].Value)
		}
		out[i] = t
	}
	return nil
}

// History implements ledger.Ledger, newest first: up to n of the
// Config.History newest runs (a job may hold one more for a while).
func (l *tickLedger) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	n = min(n, l.keep)
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
