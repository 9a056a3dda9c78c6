package consul

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/ledger"
)

// Ledger returns the election's tick ledger (ledger.Ledger), kept in
// Consul under Key+"-ledger/". A job has at most History+1 keys (<job> is
// path-escaped):
//
//	<Key>-ledger/<job>/last         {"seq":N,"tick":...,"runs":[{"seq":N,"tick":...,"instance":...,"token":...,"started":...},...]}
//	<Key>-ledger/<job>/runs/<slot>  {"seq":M,"job":...,"tick":...,...,"result":...,"error":...}, slot = M mod History
//
// "last" holds the job's newest claimed tick and the claimed runs whose
// ring entry may not be written yet (at most 3, newest first: the run
// claimed last, and those not known to be finished when a later one was
// claimed): about 40 bytes plus 110 and the instance's name per run. A
// ring entry is one ledger.Run, written when the run finishes (or,
// rarely, copied from "last" to keep it short): about 180 bytes plus the
// job's and the instance's names and the error, which Finish cuts to 2
// KiB. With short names a job keeps about 4 KiB at History 20, at most
// 50 KiB, far below Consul's 512 KiB per value; entries are overwritten,
// never deleted. History merges the ring and "last" and returns the
// newest runs, at most History. (A change of History takes effect over
// the next History claims, and slots above a lowered History stay as they
// are; entries of the layout before the ring, runs/<tick>, are read by
// History, never written.)
//
// Claim sends one write transaction per chunk of MaxBatch (127) claims,
// the chunks of a call at once: a check-session on the lock key for the
// claiming term's session (the term is stale if it fails), then one CAS of
// each job's "last" entry on the ModifyIndex last seen. That is 128
// operations, as many as Consul's agent accepts in a transaction
// (maxTxnOps in agent/txn_endpoint.go since Consul 1.14; 64 before, which
// the ledger falls back to, MaxBatch 63, when an agent refuses 128). The
// session comes from the lock key's value, which names the token: read
// once per term and cached (a session holds the lock for one term only).
// The "last" entries are cached from this Ledger's own writes and reads
// (LastClaimed), so that a job seen before needs no read; the others are
// read in one read-only transaction per chunk. Consul reports every
// failed operation of a rolled-back transaction: the claims whose CAS
// failed (another writer) are read again and decided, the rest sent
// again. Only when a claim would leave more than 3 runs in "last" (runs
// still going, or finished through another Ledger) does it first copy the
// oldest into the ring: one more write for the chunk.
//
// Finish sends one write transaction per chunk of MaxBatch runs (an
// agent's refusal of more than 64 operations lowers the limit for finishes
// as for claims and reads, and the chunk goes again): a CAS of
// each run's ring slot on the ModifyIndex this Ledger knows (cached from
// its writes and reads: a job's first History runs need none, the slots
// of a job claimed elsewhere before are read once, in one read-only
// transaction per chunk). A run this Ledger did not claim is looked up
// first, one read-only transaction per chunk. LastClaimed reads 128 jobs'
// "last" entries per read-only transaction, the pages at once. At most 32
// transactions of a Ledger are in flight at once.
//
// A Ledger remembers, for at most 32768 jobs (then it forgets one at
// random), the "last" entry and the ModifyIndex of each ring slot it
// wrote or read: about 1 KiB per job at History 20. And the session of at
// most 4 terms.
func (b *Backend) Ledger() ledger.Ledger { return b.ledger }

const (
	// txnMaxOps is how many operations a Consul agent accepts in one
	// transaction (maxTxnOps in agent/txn_endpoint.go, Consul 1.14 and
	// later).
	txnMaxOps = 128
	// oldTxnMaxOps is the same limit before Consul 1.14.
	oldTxnMaxOps = 64
	// maxPending bounds the runs a job's "last" entry carries: a claim
	// that would carry more copies the oldest into the ring first.
	maxPending = 3
	// maxErrorBytes bounds Run.Error as Finish stores it, so that a chunk
	// of finishes stays within Consul's 512 KiB per transaction.
	maxErrorBytes = 2048
	// maxTxnBytes bounds the values of one write transaction (base64 makes
	// them a third larger on the wire; Consul accepts 512 KiB).
	maxTxnBytes = 320 << 10
	// maxCachedJobs bounds the jobs a Ledger remembers. Beyond it, an
	// arbitrary job is forgotten, and read again when next claimed or
	// finished.
	maxCachedJobs = 1 << 15
	// maxSessions bounds the terms whose session a Ledger remembers.
	maxSessions = 4
	// casAttempts is how many times one claim's or finish's CAS may fail
	// on another writer's change in one call before it is given up.
	casAttempts = 5
	// maxInflight bounds the transactions a Ledger has in flight at once.
	// An agent refuses more than 200 connections from one address
	// (limits.http_max_conns_per_client), and it applies transactions one
	// after another anyway: more at once would not make an instant's
	// claims faster.
	maxInflight = 32
)

// errTooManyOps marks a transaction the agent refused for holding more
// operations than it accepts: nothing of it was applied.
var errTooManyOps = errors.New("consul: more operations than the agent accepts in a transaction")

// tickLedger is a Backend's ledger.Ledger. Its caches only save round
// trips: every write is a CAS, so a stale entry costs a retry, never a
// wrong answer.
type tickLedger struct {
	b *Backend
	// opLimit is how many operations per transaction the agent accepts:
	// txnMaxOps, or oldTxnMaxOps once an agent refused more.
	opLimit atomic.Int64
	// inflight holds a token per transaction in flight (maxInflight).
	inflight chan struct{}

	mu       sync.Mutex
	sessions map[uint64]*sessionLookup // by token
	jobs     map[string]*jobState
}

var _ ledger.Ledger = (*tickLedger)(nil)

func newLedger(b *Backend) *tickLedger {
	l := &tickLedger{b: b, inflight: make(chan struct{}, maxInflight),
		sessions: map[uint64]*sessionLookup{}, jobs: map[string]*jobState{}}
	l.opLimit.Store(txnMaxOps)
	return l
}

// lastEntry is the value of a job's "last" entry.
type lastEntry struct {
	Seq  uint64       `json:"seq,omitempty"` // claims of the job so far (0 in the earlier layout)
	Tick time.Time    `json:"tick"`          // the newest claimed tick
	Runs []pendingRun `json:"runs,omitempty"`
}

// pendingRun is a claimed run as "last" carries it (its Job is the key's,
// its Result "running").
type pendingRun struct {
	Seq      uint64    `json:"seq"`
	Tick     time.Time `json:"tick"`
	Instance string    `json:"instance,omitempty"`
	Token    uint64    `json:"token"`
	CatchUp  bool      `json:"catch_up,omitempty"`
	Started  time.Time `json:"started"`
}

func (p pendingRun) run(job string) ledger.Run {
	return ledger.Run{Job: job, Tick: p.Tick, Instance: p.Instance, Token: p.Token, CatchUp: p.CatchUp,
		Started: p.Started, Result: ledger.ResultRunning}
}

// ringRun is the value of a ring entry.
type ringRun struct {
	Seq uint64 `json:"seq,omitempty"`
	ledger.Run
}

// MaxBatch implements ledger.Ledger: 127 claims per transaction (63 with
// an agent older than Consul 1.14).
func (l *tickLedger) MaxBatch() int { return int(l.opLimit.Load()) - 1 }

func (l *tickLedger) history() uint64 { return uint64(l.b.cfg.History) }

func (l *tickLedger) jobPrefix(job string) string {
	return l.b.cfg.Key + "-ledger/" + url.PathEscape(job) + "/"
}

func (l *tickLedger) lastKey(job string) string { return l.jobPrefix(job) + "last" }

func (l *tickLedger) slotKey(job string, seq uint64) string {
	return l.jobPrefix(job) + "runs/" + strconv.FormatUint(seq%l.history(), 10)
}

// txn sends ops as one transaction, once fewer than maxInflight are in
// flight. An error wrapping errTooManyOps means the agent refused it for
// its number of operations. A read-only transaction is a consistent read:
// the raft leader confirms with a quorum that it still leads before it
// answers, so a leader deposed by a partition cannot hand a new term's
// catch-up a "last" entry older than the claims that followed it.
func (l *tickLedger) txn(ctx context.Context, ops api.TxnOps) (bool, *api.TxnResponse, error) {
	select {
	case l.inflight <- struct{}{}:
	case <-ctx.Done():
		return false, nil, ctx.Err()
	}
	ok, resp, _, err := l.b.cfg.Client.Txn().Txn(ops, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	<-l.inflight
	switch {
	case err != nil && strings.Contains(err.Error(), "Transaction contains too many operations"):
		return false, nil, fmt.Errorf("%w (%d): %w", errTooManyOps, len(ops), err)
	case err == nil && !ok && (resp == nil || len(resp.Errors) == 0):
		return false, nil, errors.New("consul: transaction refused without a reason")
	}
	return ok, resp, err
}

// lower notes that the agent refused a transaction of n operations. It
// reports whether n is above the limit now, which a smaller transaction
// would fit: the first refusal lowers the limit to oldTxnMaxOps.
func (l *tickLedger) lower(n int) bool {
	if l.opLimit.CompareAndSwap(txnMaxOps, oldTxnMaxOps) {
		l.b.log.Warn("consul agent accepts fewer operations per transaction (Consul before 1.14): ledger batches shrink",
			"ops", oldTxnMaxOps, "max_batch", l.MaxBatch())
	}
	return int64(n) > l.opLimit.Load()
}

// get reads keys in read-only transactions of opLimit operations each,
// sent at once: with api.KVGetOrEmpty one entry per key (ModifyIndex 0 if
// it does not exist), with api.KVGetTree every entry under each prefix. It
// returns the entries by key (an ACL may hide some).
func (l *tickLedger) get(ctx context.Context, verb api.KVOp, keys []string) (map[string]*api.KVPair, error) {
	page := int(l.opLimit.Load())
	out := map[string]*api.KVPair{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, (len(keys)+page-1)/page)
	for p := range errs {
		part := keys[p*page : min((p+1)*page, len(keys))]
		wg.Go(func() {
			ops := make(api.TxnOps, len(part))
			for i, k := range part {
				ops[i] = &api.TxnOp{KV: &api.KVTxnOp{Verb: verb, Key: k}}
			}
			ok, resp, err := l.txn(ctx, ops)
			if errors.Is(err, errTooManyOps) && l.lower(len(ops)) {
				m, err := l.get(ctx, verb, part) // in smaller pages
				mu.Lock()
				defer mu.Unlock()
				for k, v := range m {
					out[k] = v
				}
				errs[p] = err
				return
			}
			if err == nil && !ok {
				err = fmt.Errorf("transaction refused: %s", txnErrors(resp))
			}
			if err != nil {
				errs[p] = err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range resp.Results {
				if r != nil && r.KV != nil {
					out[r.KV.Key] = r.KV
				}
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
