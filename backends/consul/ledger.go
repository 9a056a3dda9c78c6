package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

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

// jobState is what a Ledger knows of a job.
type jobState struct {
	last      lastEntry
	lastIndex uint64 // ModifyIndex of "last"; 0: no entry
	lastKnown bool
	slots     []slotState // by slot number; nil until one is known
}

// slotState is a ring slot as this Ledger last wrote or read it.
type slotState struct {
	known bool
	stale bool   // not known: it changed, or may have (read it before use)
	index uint64 // ModifyIndex; 0: no entry
	seq   uint64 // of the run in it
	tick  int64  // UnixNano of the run's tick
	token uint64
}

// holds reports whether the slot holds the run with tick and token.
func (s slotState) holds(tick time.Time, token uint64) bool {
	return s.known && s.index != 0 && s.tick == tick.UnixNano() && s.token == token
}

// sessionLookup is the session of one term, once read.
type sessionLookup struct {
	done chan struct{} // closed when sid and err are set
	sid  string        // "": the term no longer holds
	err  error
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
// its number of operations.
func (l *tickLedger) txn(ctx context.Context, ops api.TxnOps) (bool, *api.TxnResponse, error) {
	select {
	case l.inflight <- struct{}{}:
	case <-ctx.Done():
		return false, nil, ctx.Err()
	}
	ok, resp, _, err := l.b.cfg.Client.Txn().Txn(ops, (&api.QueryOptions{}).WithContext(ctx))
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

// session returns the session holding the lock for the term with token,
// or "" if that term no longer holds. A live term's session is cached (a
// session holds the lock for one term: Acquire creates one per term) until
// a check-session on it fails; concurrent callers share one read.
func (l *tickLedger) session(ctx context.Context, token uint64) (string, error) {
	l.mu.Lock()
	s, ok := l.sessions[token]
	if !ok {
		s = &sessionLookup{done: make(chan struct{})}
		if len(l.sessions) >= maxSessions {
			l.evictSessionLocked()
		}
		l.sessions[token] = s
		l.mu.Unlock()
		s.sid, s.err = l.readSession(ctx, token)
		if s.err != nil || s.sid == "" {
			l.dropSession(token, s)
		}
		close(s.done)
	} else {
		l.mu.Unlock()
	}
	select {
	case <-s.done:
		return s.sid, s.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// evictSessionLocked forgets the oldest term whose session was read.
func (l *tickLedger) evictSessionLocked() {
	var oldest uint64
	found := false
	for tok, s := range l.sessions {
		select {
		case <-s.done:
			if !found || tok < oldest {
				oldest, found = tok, true
			}
		default:
		}
	}
	if found {
		delete(l.sessions, oldest)
	}
}

// dropSession forgets the session of token if it is still s (any if s is
// nil).
func (l *tickLedger) dropSession(token uint64, s *sessionLookup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.sessions[token]; ok && (s == nil || cur == s) {
		delete(l.sessions, token)
	}
}

// readSession reads the lock key: the session named in its value, if that
// value or the key's ModifyIndex names token, or "".
func (l *tickLedger) readSession(ctx context.Context, token uint64) (string, error) {
	b := l.b
	pair, _, err := b.cfg.Client.KV().Get(b.cfg.Key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return "", err
	}
	var v value
	if pair == nil || pair.Session == "" || json.Unmarshal(pair.Value, &v) != nil || v.Session != pair.Session ||
		(v.Token != token && pair.ModifyIndex != token) {
		return "", nil
	}
	return pair.Session, nil
}

// jobLocked returns the job's state, creating it (and forgetting another
// job if there are too many).
func (l *tickLedger) jobLocked(job string) *jobState {
	j := l.jobs[job]
	if j == nil {
		if len(l.jobs) >= maxCachedJobs {
			for k := range l.jobs {
				delete(l.jobs, k)
				break
			}
		}
		j = &jobState{}
		l.jobs[job] = j
	}
	return j
}

// knownLast returns the job's "last" entry and its ModifyIndex as this
// Ledger last saw them.
func (l *tickLedger) knownLast(job string) (lastEntry, uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if j := l.jobs[job]; j != nil && j.lastKnown {
		return j.last, j.lastIndex, true
	}
	return lastEntry{}, 0, false
}

// sawLast records the job's "last" entry at index, unless a newer one is
// known.
func (l *tickLedger) sawLast(job string, e lastEntry, index uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobLocked(job)
	if !j.lastKnown || index >= j.lastIndex {
		j.last, j.lastIndex, j.lastKnown = e, index, true
	}
}

// forgetLast drops what this Ledger knows of the jobs' "last" entries
// (they changed, or may have).
func (l *tickLedger) forgetLast(jobs ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, job := range jobs {
		if j := l.jobs[job]; j != nil {
			j.last, j.lastIndex, j.lastKnown = lastEntry{}, 0, false
		}
	}
}

// slot returns what this Ledger knows of the ring slot of the job's run
// seq. A slot of one of the job's first History runs that it knows nothing
// of is taken to be empty (a CAS says otherwise if it is not).
func (l *tickLedger) slot(job string, seq uint64) (slotState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if j := l.jobs[job]; j != nil && j.slots != nil {
		switch s := j.slots[seq%l.history()]; {
		case s.known:
			return s, true
		case s.stale:
			return slotState{}, false
		}
	}
	if seq <= l.history() {
		return slotState{known: true}, true
	}
	return slotState{}, false
}

// setSlot records the ring slot of the job's run seq.
func (l *tickLedger) setSlot(job string, seq uint64, s slotState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobLocked(job)
	if j.slots == nil {
		j.slots = make([]slotState, l.history())
	}
	j.slots[seq%l.history()] = s
}

// inRing reports whether this Ledger knows the run p of job to be in its
// ring slot.
func (l *tickLedger) inRing(job string, p pendingRun) bool {
	s, ok := l.slot(job, p.Seq)
	return ok && s.holds(p.Tick, p.Token)
}

// seqOf returns the number of the run r if this Ledger knows its entry:
// carried by "last" or in the ring.
func (l *tickLedger) seqOf(r ledger.Run) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobs[r.Job]
	if j == nil {
		return 0, false
	}
	if j.lastKnown {
		for _, p := range j.last.Runs {
			if p.Tick.Equal(r.Tick) && p.Token == r.Token {
				return p.Seq, true
			}
		}
	}
	for _, s := range j.slots {
		if s.holds(r.Tick, r.Token) {
			return s.seq, true
		}
	}
	return 0, false
}

// decodeSlot returns the slot state of a ring entry as read.
func decodeSlot(pair *api.KVPair) (slotState, error) {
	if pair.ModifyIndex == 0 {
		return slotState{known: true}, nil // get-or-empty of a key that does not exist
	}
	var r ringRun
	if err := json.Unmarshal(pair.Value, &r); err != nil {
		return slotState{}, fmt.Errorf("decode %s: %w", pair.Key, err)
	}
	return slotState{known: true, index: pair.ModifyIndex, seq: r.Seq, tick: r.Tick.UnixNano(), token: r.Token}, nil
}

// lastRead is a job's "last" entry as read, or why it could not be used.
type lastRead struct {
	last  lastEntry
	index uint64
	err   error
}

// readLast reads the "last" entries of jobs (a read-only transaction per
// opLimit jobs, sent at once) and remembers them.
func (l *tickLedger) readLast(ctx context.Context, jobs []string) ([]lastRead, error) {
	keys := make([]string, len(jobs))
	for i, job := range jobs {
		keys[i] = l.lastKey(job)
	}
	got, err := l.get(ctx, api.KVGetOrEmpty, keys)
	if err != nil {
		return nil, err
	}
	out := make([]lastRead, len(jobs))
	for i, job := range jobs {
		pair := got[keys[i]]
		switch {
		case pair == nil:
			out[i].err = fmt.Errorf("%s missing from the transaction's results (an ACL may hide it)", keys[i])
		case pair.ModifyIndex == 0: // no entry
			l.sawLast(job, lastEntry{}, 0)
		default:
			if err := json.Unmarshal(pair.Value, &out[i].last); err != nil {
				out[i].err = fmt.Errorf("decode %s: %w", keys[i], err)
				continue
			}
			out[i].index = pair.ModifyIndex
			l.sawLast(job, out[i].last, pair.ModifyIndex)
		}
	}
	return out, nil
}

// Claim implements ledger.Ledger. A claim of a job already in the call is
// refused (not sent) with an error of its own.
func (l *tickLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	errs := make([]error, len(cs))
	first := make(map[string]int, len(cs))
	byToken := map[uint64][]int{}
	var tokens []uint64
	for i, c := range cs {
		if j, dup := first[c.Job]; dup {
			errs[i] = fmt.Errorf("consul: claim %s at %v: the same job as claim %d of this call: not sent", c.Job, c.Tick, j)
			continue
		}
		first[c.Job] = i
		if _, ok := byToken[c.Token]; !ok {
			tokens = append(tokens, c.Token)
		}
		byToken[c.Token] = append(byToken[c.Token], i)
	}
	for _, tok := range tokens { // one, as the Host calls it
		l.claimTerm(ctx, cs, byToken[tok], errs)
	}
	return errs
}

// claimTerm claims cs[idx], all of one token, a chunk per transaction.
func (l *tickLedger) claimTerm(ctx context.Context, cs []ledger.Claim, idx []int, errs []error) {
	token := cs[idx[0]].Token
	sid, err := l.session(ctx, token)
	if err != nil {
		for _, i := range idx {
			errs[i] = fmt.Errorf("consul: claim %s at %v: read lock key: %w", cs[i].Job, cs[i].Tick, err)
		}
		return
	}
	if sid == "" {
		for _, i := range idx {
			errs[i] = staleClaim(cs[i], "not a live term")
		}
		return
	}
	for len(idx) > 0 {
		n := l.MaxBatch()
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			redo []int
		)
		for from := 0; from < len(idx); from += n {
			chunk := idx[from:min(from+n, len(idx))]
			wg.Go(func() {
				if r := l.claimChunk(ctx, sid, cs, chunk, errs); len(r) > 0 {
					mu.Lock()
					redo = append(redo, r...)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		// Not empty only if the agent refused a chunk's size: the limit is
		// lower now.
		slices.Sort(redo)
		idx = redo
	}
}

func staleClaim(c ledger.Claim, why string) error {
	return fmt.Errorf("consul: claim %s at %v with token %d: %s: %w", c.Job, c.Tick, c.Token, why, ledger.ErrStaleTerm)
}

func tickClaimed(c ledger.Claim, last time.Time) error {
	return fmt.Errorf("consul: claim %s at %v (last %v): %w", c.Job, c.Tick, last, ledger.ErrTickClaimed)
}

// nextEntry returns the "last" entry claim c makes of the entry old: the
// new run, then old's runs that are newer than the History before it and
// not known to be in the ring. The runs beyond maxPending are returned
// apart: they must be put in the ring first.
func (l *tickLedger) nextEntry(c ledger.Claim, old lastEntry) (next lastEntry, overflow []pendingRun) {
	seq := old.Seq + 1
	next = lastEntry{Seq: seq, Tick: c.Tick, Runs: []pendingRun{{Seq: seq, Tick: c.Tick, Instance: c.Instance,
		Token: c.Token, CatchUp: c.CatchUp, Started: c.Started}}}
	for _, p := range old.Runs {
		if p.Seq+l.history() > seq && p.Seq < seq && !l.inRing(c.Job, p) {
			next.Runs = append(next.Runs, p)
		}
	}
	if len(next.Runs) > maxPending {
		overflow = next.Runs[maxPending:]
		next.Runs = next.Runs[:maxPending:maxPending]
	}
	return next, overflow
}

// claimChunk claims cs[idx] (at most MaxBatch, distinct jobs, one term
// with session sid) in one write transaction, or a few if other writers
// change some of their jobs meanwhile, and sets their errors. It returns
// the claims left undecided because the agent refused a transaction that
// large (the limit is lower now).
func (l *tickLedger) claimChunk(ctx context.Context, sid string, cs []ledger.Claim, idx []int, errs []error) []int {
	type known struct {
		last  lastEntry
		index uint64
	}
	states := make(map[int]known, len(idx))
	var need []int // claims whose job's "last" entry must be read
	for _, i := range idx {
		if e, index, ok := l.knownLast(cs[i].Job); ok {
			states[i] = known{e, index}
		} else {
			need = append(need, i)
		}
	}
	pending := idx                 // not decided yet
	refused := map[int]time.Time{} // tick not after the last one: ErrTickClaimed once the term is checked
	conflicts := map[int]int{}
	// termHeld: a write of this chunk was rolled back on CAS failures
	// alone, so its check-session passed: the term held then.
	termHeld := false
	decideRefused := func(stale bool, why string, err error) {
		for i, last := range refused {
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("consul: claim %s at %v: %w", cs[i].Job, cs[i].Tick, err)
			case stale:
				errs[i] = staleClaim(cs[i], why)
			default:
				errs[i] = tickClaimed(cs[i], last)
			}
		}
	}
	fail := func(is []int, format string, a ...any) {
		for _, i := range is {
			errs[i] = fmt.Errorf("consul: claim %s at %v: %w", cs[i].Job, cs[i].Tick, fmt.Errorf(format, a...))
		}
	}
	for {
		if len(need) > 0 {
			jobs := make([]string, len(need))
			for k, i := range need {
				jobs[k] = cs[i].Job
			}
			read, err := l.readLast(ctx, jobs)
			if err != nil {
				fail(pending, "read last: %w", err)
				decideRefused(false, "", err)
				return nil
			}
			for k, i := range need {
				if read[k].err != nil {
					fail([]int{i}, "%w", read[k].err)
					pending = without(pending, i)
					continue
				}
				states[i] = known{read[k].last, read[k].index}
			}
			need = nil
		}
		var send []int
		for _, i := range pending {
			if st := states[i]; st.index != 0 && !cs[i].Tick.After(st.last.Tick) {
				refused[i] = st.last.Tick
			} else {
				send = append(send, i)
			}
		}
		pending = send
		if len(send) == 0 {
			if len(refused) > 0 && termHeld {
				decideRefused(false, "", nil)
			} else if len(refused) > 0 {
				// Refused on their ticks: a stale term is said first all
				// the same, as a write would.
				stale, err := l.checkSession(ctx, sid)
				if stale {
					l.dropSession(cs[idx[0]].Token, nil)
				}
				decideRefused(stale, "session "+sid+" no longer holds "+l.b.cfg.Key, err)
			}
			return nil
		}

		next := make(map[int]lastEntry, len(send))
		var flush []slotWrite
		var flushOf []int
		for _, i := range send {
			e, over := l.nextEntry(cs[i], states[i].last)
			next[i] = e
			for _, p := range over {
				raw, err := json.Marshal(ringRun{Seq: p.Seq, Run: p.run(cs[i].Job)})
				if err != nil {
					panic(err) // times and strings always encode
				}
				flush = append(flush, slotWrite{job: cs[i].Job, seq: p.Seq, tick: p.Tick, token: p.Token, raw: raw})
				flushOf = append(flushOf, i)
			}
		}
		if len(flush) > 0 {
			// More runs going than "last" carries: the oldest go to the
			// ring first (not conditioned on the term: they were claimed).
			for k, err := range l.writeSlots(ctx, flush) {
				if i := flushOf[k]; err != nil && slices.Contains(send, i) {
					fail([]int{i}, "copy run %d to the ring: %w", flush[k].seq, err)
					send, pending = without(send, i), without(pending, i)
				}
			}
			if len(send) == 0 {
				continue
			}
		}

		ops := make(api.TxnOps, 0, 1+len(send))
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: l.b.cfg.Key, Session: sid}})
		for _, i := range send {
			raw, err := json.Marshal(next[i])
			if err != nil {
				panic(err)
			}
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: l.lastKey(cs[i].Job), Value: raw, Index: states[i].index}})
		}
		ok, resp, err := l.txn(ctx, ops)
		if errors.Is(err, errTooManyOps) && l.lower(len(ops)) {
			redo := slices.Clone(send)
			for i := range refused {
				redo = append(redo, i)
			}
			return redo
		}
		if err != nil {
			// Applied or not: what we know of these jobs may be stale.
			for _, i := range send {
				l.forgetLast(cs[i].Job)
			}
			fail(send, "%w", err)
			decideRefused(false, "", err)
			return nil
		}
		if ok {
			index := make(map[string]uint64, len(resp.Results))
			for _, r := range resp.Results {
				if r != nil && r.KV != nil {
					index[r.KV.Key] = r.KV.ModifyIndex
				}
			}
			for _, i := range send {
				if ix, found := index[l.lastKey(cs[i].Job)]; found {
					l.sawLast(cs[i].Job, next[i], ix)
				} else {
					l.forgetLast(cs[i].Job)
				}
				errs[i] = nil
			}
			decideRefused(false, "", nil)
			return nil
		}

		// Rolled back: nothing was written. Consul lists every operation
		// that failed.
		stale := false
		var again []int
		var other []string
		for _, e := range resp.Errors {
			switch {
			case e.OpIndex == 0 && !strings.Contains(e.What, "Permission denied"):
				stale = true
			case e.OpIndex >= 1 && e.OpIndex < len(ops) && strings.HasSuffix(e.What, "index is stale"):
				again = append(again, send[e.OpIndex-1])
			default:
				other = append(other, e.What)
			}
		}
		if stale {
			l.dropSession(cs[idx[0]].Token, nil)
			why := fmt.Sprintf("session %s no longer holds %s", sid, l.b.cfg.Key)
			for _, i := range send {
				errs[i] = staleClaim(cs[i], why)
			}
			decideRefused(true, why, nil)
			return nil
		}
		if len(other) > 0 {
			err := fmt.Errorf("transaction rolled back: %s", txnErrors(resp))
			fail(send, "%w", err)
			decideRefused(false, "", err)
			return nil
		}
		// Another writer changed these jobs' "last" entries since they were
		// read: read them again, decide them, and send the rest again.
		termHeld = true
		for _, i := range again {
			l.forgetLast(cs[i].Job)
			if conflicts[i]++; conflicts[i] >= casAttempts {
				fail([]int{i}, "%s kept changing (%d attempts)", l.lastKey(cs[i].Job), conflicts[i])
				pending = without(pending, i)
				continue
			}
			need = append(need, i)
		}
	}
}

// checkSession reports whether the session sid no longer holds the lock
// key, in a read-only transaction.
func (l *tickLedger) checkSession(ctx context.Context, sid string) (stale bool, err error) {
	ok, resp, err := l.txn(ctx, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: l.b.cfg.Key, Session: sid}}})
	switch {
	case err != nil:
		return false, err
	case ok:
		return false, nil
	case strings.Contains(txnErrors(resp), "Permission denied"):
		return false, fmt.Errorf("check session: %s", txnErrors(resp))
	}
	return true, nil
}

func without(s []int, v int) []int {
	return slices.DeleteFunc(slices.Clone(s), func(x int) bool { return x == v })
}

// slotWrite is a run to be put in its job's ring slot.
type slotWrite struct {
	job   string
	seq   uint64
	tick  time.Time
	token uint64
	raw   []byte // the ringRun
	// replace: Finish, which replaces the run's entry if the slot holds
	// it already; a copy keeps it (it may be finished).
	replace bool
}

// writeSlots puts each run of ws in its ring slot with a CAS on the
// ModifyIndex this Ledger knows, after reading the slots it does not
// know, unless the slot holds a newer run (the run was trimmed) or,
// for a copy, the run already. It returns one error per write, nil when
// it was written or had nothing to do. A slot that changed meanwhile is
// read again and decided again. One write transaction unless the values
// are too large for one (at most MaxBatch writes per call).
func (l *tickLedger) writeSlots(ctx context.Context, ws []slotWrite) []error {
	errs := make([]error, len(ws))
	pending := make([]int, len(ws))
	for i := range pending {
		pending[i] = i
	}
	conflicts := map[int]int{}
	fail := func(is []int, err error) {
		for _, i := range is {
			errs[i] = err
		}
	}
	for len(pending) > 0 {
		var unknown []int
		for _, i := range pending {
			if _, ok := l.slot(ws[i].job, ws[i].seq); !ok {
				unknown = append(unknown, i)
			}
		}
		if len(unknown) > 0 {
			keys := make([]string, len(unknown))
			for k, i := range unknown {
				keys[k] = l.slotKey(ws[i].job, ws[i].seq)
			}
			got, err := l.get(ctx, api.KVGetOrEmpty, keys)
			for k, i := range unknown {
				var s slotState
				if err == nil {
					if pair := got[keys[k]]; pair == nil {
						err = fmt.Errorf("%s missing from the transaction's results (an ACL may hide it)", keys[k])
					} else {
						s, err = decodeSlot(pair)
					}
				}
				if err != nil {
					fail([]int{i}, fmt.Errorf("read %s: %w", keys[k], err))
					pending = without(pending, i)
					continue
				}
				l.setSlot(ws[i].job, ws[i].seq, s)
			}
		}
		// Decide each against the slot as known.
		var send []int
		index := map[int]uint64{}
		for _, i := range pending {
			w := ws[i]
			s, _ := l.slot(w.job, w.seq)
			trimmed := s.index != 0 && s.tick > w.tick.UnixNano()                        // a newer run is there
			another := s.index != 0 && s.tick == w.tick.UnixNano() && s.token != w.token // not this run's entry
			there := s.holds(w.tick, w.token) && !w.replace                              // a copy the ring has already
			if !trimmed && !another && !there {
				send = append(send, i)
				index[i] = s.index
			}
		}
		pending = nil
		// One transaction per opLimit writes or maxTxnBytes of values.
		for len(send) > 0 {
			n, size := 0, 0
			for n < len(send) && int64(n) < l.opLimit.Load() && (n == 0 || size+len(ws[send[n]].raw) <= maxTxnBytes) {
				size += len(ws[send[n]].raw)
				n++
			}
			part := send[:n]
			send = send[n:]
			ops := make(api.TxnOps, len(part))
			for k, i := range part {
				ops[k] = &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: l.slotKey(ws[i].job, ws[i].seq), Value: ws[i].raw, Index: index[i]}}
			}
			ok, resp, err := l.txn(ctx, ops)
			switch {
			case errors.Is(err, errTooManyOps) && l.lower(len(ops)):
				// Nothing applied: sent again, within the lowered limit.
				send = append(slices.Clone(part), send...)
			case err != nil:
				// Written or not: read the slots again next time.
				for _, i := range part {
					l.setSlot(ws[i].job, ws[i].seq, slotState{stale: true})
				}
				fail(part, err)
			case ok:
				got := make(map[string]uint64, len(resp.Results))
				for _, r := range resp.Results {
					if r != nil && r.KV != nil {
						got[r.KV.Key] = r.KV.ModifyIndex
					}
				}
				for _, i := range part {
					w := ws[i]
					s := slotState{stale: true}
					if ix, found := got[l.slotKey(w.job, w.seq)]; found {
						s = slotState{known: true, index: ix, seq: w.seq, tick: w.tick.UnixNano(), token: w.token}
					}
					l.setSlot(w.job, w.seq, s)
				}
			default:
				// Rolled back: the slots that changed are read again; the
				// others are sent again.
				var other, gaveUp []int
				for _, e := range resp.Errors {
					if e.OpIndex < 0 || e.OpIndex >= len(part) || !strings.HasSuffix(e.What, "index is stale") {
						other = append(other, e.OpIndex)
						continue
					}
					i := part[e.OpIndex]
					l.setSlot(ws[i].job, ws[i].seq, slotState{stale: true})
					if conflicts[i]++; conflicts[i] >= casAttempts {
						fail([]int{i}, fmt.Errorf("%s kept changing (%d attempts)", l.slotKey(ws[i].job, ws[i].seq), conflicts[i]))
						gaveUp = append(gaveUp, i)
					}
				}
				if len(other) > 0 {
					fail(part, fmt.Errorf("transaction rolled back: %s", txnErrors(resp)))
					continue
				}
				for _, i := range part {
					if !slices.Contains(gaveUp, i) {
						pending = append(pending, i)
					}
				}
			}
		}
	}
	return errs
}

// LastClaimed implements ledger.Ledger: 128 jobs per read-only
// transaction, the pages at once.
func (l *tickLedger) LastClaimed(ctx context.Context, jobs []string) ([]time.Time, error) {
	out := make([]time.Time, len(jobs))
	if len(jobs) == 0 {
		return out, nil
	}
	read, err := l.readLast(ctx, jobs)
	if err != nil {
		return nil, fmt.Errorf("consul: last claimed: %w", err)
	}
	var errs []error
	for i, r := range read {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", jobs[i], r.err))
		}
		out[i] = r.last.Tick
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("consul: last claimed: %w", err)
	}
	return out, nil
}

// Finish implements ledger.Ledger: it writes r in the ring entry of the
// run with r's job, tick and token, if that run is claimed and still in
// the history (a CAS, not conditioned on the term). r.Error is cut to 2
// KiB. A run of the same job and tick as an earlier one of the call is
// refused (not sent) with an error of its own.
func (l *tickLedger) Finish(ctx context.Context, rs []ledger.Run) []error {
	errs := make([]error, len(rs))
	type runID struct {
		job  string
		tick int64
	}
	first := make(map[runID]int, len(rs))
	var idx []int
	for i, r := range rs {
		id := runID{r.Job, r.Tick.UnixNano()}
		if j, dup := first[id]; dup {
			errs[i] = fmt.Errorf("consul: finish %s at %v: the same run as finish %d of this call: not sent", r.Job, r.Tick, j)
			continue
		}
		first[id] = i
		idx = append(idx, i)
	}
	n := l.MaxBatch()
	var wg sync.WaitGroup
	for from := 0; from < len(idx); from += n {
		chunk := idx[from:min(from+n, len(idx))]
		wg.Go(func() { l.finishChunk(ctx, rs, chunk, errs) })
	}
	wg.Wait()
	return errs
}

// finishChunk finishes rs[idx] (at most MaxBatch): one write transaction,
// after one read-only transaction to look up the runs this Ledger does not
// know, and one for the ring slots it does not know.
func (l *tickLedger) finishChunk(ctx context.Context, rs []ledger.Run, idx []int, errs []error) {
	seqs := make(map[int]uint64, len(idx))
	var lookup []int
	for _, i := range idx {
		if seq, ok := l.seqOf(rs[i]); ok {
			seqs[i] = seq
		} else {
			lookup = append(lookup, i)
		}
	}
	if len(lookup) > 0 {
		found, err := l.lookupRuns(ctx, rs, lookup)
		for _, i := range lookup {
			seq, ok := found[i]
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("consul: finish %s at %v: look up the run: %w", rs[i].Job, rs[i].Tick, err)
			case ok:
				seqs[i] = seq
			default:
				errs[i] = nil // no entry with its tick and token: nothing to do
			}
		}
	}
	var ws []slotWrite
	var wsOf []int
	for _, i := range idx {
		seq, ok := seqs[i]
		if !ok {
			continue
		}
		r := rs[i]
		r.Error = truncate(r.Error, maxErrorBytes)
		raw, err := json.Marshal(ringRun{Seq: seq, Run: r})
		if err != nil {
			panic(err) // times and strings always encode
		}
		ws = append(ws, slotWrite{job: r.Job, seq: seq, tick: r.Tick, token: r.Token, raw: raw, replace: true})
		wsOf = append(wsOf, i)
	}
	for k, err := range l.writeSlots(ctx, ws) {
		i := wsOf[k]
		if err != nil {
			err = fmt.Errorf("consul: finish %s at %v: %w", rs[i].Job, rs[i].Tick, err)
		}
		errs[i] = err
	}
}

// lookupRuns finds the runs rs[idx] by tick and token in their jobs'
// "last" entries and rings, listing each job's keys in one read-only
// transaction (a page per opLimit jobs), and remembers what it read. It
// returns the number of each run found.
func (l *tickLedger) lookupRuns(ctx context.Context, rs []ledger.Run, idx []int) (map[int]uint64, error) {
	var prefixes []string
	seen := map[string]bool{}
	for _, i := range idx {
		if p := l.jobPrefix(rs[i].Job); !seen[p] {
			seen[p] = true
			prefixes = append(prefixes, p)
		}
	}
	got, err := l.get(ctx, api.KVGetTree, prefixes)
	if err != nil {
		return nil, err
	}
	found := make(map[int]uint64, len(idx))
	for _, i := range idx {
		r := rs[i]
		prefix := l.jobPrefix(r.Job)
		if pair := got[prefix+"last"]; pair != nil {
			var e lastEntry
			if json.Unmarshal(pair.Value, &e) == nil {
				l.sawLast(r.Job, e, pair.ModifyIndex)
				for _, p := range e.Runs {
					if p.Tick.Equal(r.Tick) && p.Token == r.Token {
						found[i] = p.Seq
					}
				}
			}
		}
		for slot := range l.history() {
			pair := got[prefix+"runs/"+strconv.FormatUint(slot, 10)]
			if pair == nil { // the tree has every key under the prefix
				l.setSlot(r.Job, slot, slotState{known: true})
				continue
			}
			if s, err := decodeSlot(pair); err == nil && s.seq%l.history() == slot {
				l.setSlot(r.Job, s.seq, s)
				if s.holds(r.Tick, r.Token) {
					found[i] = s.seq
				}
			}
		}
	}
	return found, nil
}

// truncate cuts s to at most n bytes, at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " [cut]"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// History implements ledger.Ledger: one read of the job's keys. A run
// both in the ring and carried by "last" is the ring's (finished, or as
// claimed).
func (l *tickLedger) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	if n <= 0 {
		return nil, nil
	}
	prefix := l.jobPrefix(job)
	pairs, _, err := l.b.cfg.Client.KV().List(prefix, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("consul: history %s: %w", job, err)
	}
	type runID struct {
		tick  int64
		token uint64
	}
	seen := map[runID]bool{}
	var runs, carried []ledger.Run
	var errs []error
	for _, p := range pairs {
		switch {
		case p.Key == prefix+"last":
			var e lastEntry
			if err := json.Unmarshal(p.Value, &e); err != nil {
				errs = append(errs, fmt.Errorf("decode %s: %w", p.Key, err))
				continue
			}
			for _, pr := range e.Runs {
				carried = append(carried, pr.run(job))
			}
		case strings.HasPrefix(p.Key, prefix+"runs/"):
			var r ringRun
			if err := json.Unmarshal(p.Value, &r); err != nil {
				errs = append(errs, fmt.Errorf("decode %s: %w", p.Key, err))
				continue
			}
			runs = append(runs, r.Run)
			seen[runID{r.Tick.UnixNano(), r.Token}] = true
		}
	}
	for _, r := range carried {
		if !seen[runID{r.Tick.UnixNano(), r.Token}] {
			runs = append(runs, r)
		}
	}
	slices.SortFunc(runs, func(a, b ledger.Run) int { return b.Tick.Compare(a.Tick) }) // newest first
	runs = runs[:min(n, l.b.cfg.History, len(runs))]
	if err := errors.Join(errs...); err != nil {
		return runs, fmt.Errorf("consul: history %s: %w", job, err)
	}
	return runs, nil
}
