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
//	<Key>-ledger/<job>/last          {"tick":...,"token":...,"instance":...,"seq":...}
//	<Key>-ledger/<job>/runs/<slot>   one ledger.Run as JSON, slot = seq mod History
//
// "last" is about 110 bytes plus the instance's name. A run is about 200
// bytes plus the job's and the instance's names and its error, which
// Finish cuts to 4 KiB: with short names, History 20 keeps about 4 KiB
// per job (and at most 85 KiB), far below Consul's 512 KiB per value.
// The runs form a ring: the claim numbered seq overwrites the slot of
// the claim History before it, so nothing is ever deleted. (A change of
// History takes effect over the next History claims of a job; slots above
// a lowered History are left as they are. Run entries of the earlier
// layout, runs/<tick>, are read by History and Finish, never written.)
//
// Claim sends one write transaction per chunk of MaxBatch claims, the
// chunks of a call at once: a check-session on the lock key for the
// claiming term's session (the term is stale if it fails), then per claim
// a CAS of the job's "last" entry on the ModifyIndex last seen and a set
// of its ring slot. That is 1 + 2*63 = 127 operations: Consul's agent
// accepts 128 per transaction (maxTxnOps in agent/txn_endpoint.go since
// Consul 1.14; 64 before, which the ledger falls back to, MaxBatch 31,
// when an agent refuses 127). The session comes from the lock key's value,
// which names the token, read once per term and then cached (a session
// holds the lock for one term only). The "last" entries come from this
// Ledger's own writes and reads (LastClaimed), cached, so that a job
// claimed before needs no read; the others are read in one read-only
// transaction per chunk. Consul reports every failed operation of a
// rolled-back transaction: the claims whose CAS failed (another writer)
// are read again and decided, the rest sent again.
//
// Finish sends one write transaction per chunk of MaxBatch runs: a CAS
// of each run's ring slot on the ModifyIndex its claim produced, cached
// until the Finish; for the runs not cached (claimed through another
// Ledger, or whose CAS failed), one read-only transaction per chunk lists
// their jobs' runs first. LastClaimed reads 128 jobs' "last" entries per
// read-only transaction, the pages at once.
func (b *Backend) Ledger() ledger.Ledger { return b.ledger }

const (
	// txnMaxOps is how many operations a Consul agent accepts in one
	// transaction (maxTxnOps in agent/txn_endpoint.go, Consul 1.14 and
	// later).
	txnMaxOps = 128
	// oldTxnMaxOps is the same limit before Consul 1.14.
	oldTxnMaxOps = 64
	// claimOps is how many operations a claim adds to a transaction: the
	// CAS of "last" and the set of the ring slot.
	claimOps = 2
	// maxErrorBytes bounds Run.Error as Finish stores it, so that a chunk
	// of finishes stays within Consul's 512 KiB per transaction.
	maxErrorBytes = 4096
	// maxCachedJobs bounds the jobs whose "last" entry and running claims
	// a Ledger remembers. Beyond it, an arbitrary job is forgotten, and
	// read again when next claimed or finished.
	maxCachedJobs = 1 << 16
	// maxOpenRuns bounds the running claims remembered per job (for
	// Finish's CAS); an older one is looked up when finished.
	maxOpenRuns = 8
	// maxSessions bounds the terms whose session a Ledger remembers.
	maxSessions = 4
	// claimAttempts is how many times one claim's or finish's CAS may fail
	// on another writer's change in one call before it is given up.
	claimAttempts = 5
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

// sessionLookup is the session of one term, once read.
type sessionLookup struct {
	done chan struct{} // closed when sid and err are set
	sid  string        // "": the term no longer holds
	err  error
}

// lastState is what a job's "last" entry held at some ModifyIndex.
type lastState struct {
	index uint64 // the entry's ModifyIndex; 0: no entry
	tick  time.Time
	seq   uint64
}

// jobState is what a Ledger remembers of a job.
type jobState struct {
	last  lastState
	known bool      // last is set
	open  []openRun // running claims this Ledger made, oldest first
}

// openRun is a run entry as a claim wrote it.
type openRun struct {
	tick  time.Time
	token uint64
	key   string
	index uint64 // ModifyIndex the claim gave the entry
}

// lastClaim is the value of a job's "last" entry.
type lastClaim struct {
	Tick     time.Time `json:"tick"`
	Token    uint64    `json:"token"`
	Instance string    `json:"instance,omitempty"`
	Seq      uint64    `json:"seq,omitempty"`
}

// MaxBatch implements ledger.Ledger: 63 claims per transaction (31 with
// an agent older than Consul 1.14).
func (l *tickLedger) MaxBatch() int { return (int(l.opLimit.Load()) - 1) / claimOps }

func (l *tickLedger) jobPrefix(job string) string {
	return l.b.cfg.Key + "-ledger/" + url.PathEscape(job) + "/"
}

func (l *tickLedger) lastKey(job string) string { return l.jobPrefix(job) + "last" }

func (l *tickLedger) runsPrefix(job string) string { return l.jobPrefix(job) + "runs/" }

func (l *tickLedger) slotKey(job string, seq uint64) string {
	return l.runsPrefix(job) + strconv.FormatUint(seq%uint64(l.b.cfg.History), 10)
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

// known returns the job's "last" entry as this Ledger last saw it.
func (l *tickLedger) known(job string) (lastState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if j := l.jobs[job]; j != nil && j.known {
		return j.last, true
	}
	return lastState{}, false
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

// saw records that the job's "last" entry was st, unless a newer one is
// known.
func (l *tickLedger) saw(job string, st lastState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobLocked(job)
	if !j.known || st.index >= j.last.index {
		j.last, j.known = st, true
	}
}

// claimed records a claim this Ledger wrote: the job's new "last" entry
// and its run entry.
func (l *tickLedger) claimed(job string, st lastState, run openRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobLocked(job)
	if !j.known || st.index >= j.last.index {
		j.last, j.known = st, true
	}
	// The slot's earlier run is gone.
	j.open = slices.DeleteFunc(j.open, func(r openRun) bool { return r.key == run.key })
	if len(j.open) >= maxOpenRuns {
		j.open = slices.Delete(j.open, 0, len(j.open)-maxOpenRuns+1)
	}
	j.open = append(j.open, run)
}

// forget drops what this Ledger knows of the jobs' "last" entries (they
// changed, or may have).
func (l *tickLedger) forget(jobs ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, job := range jobs {
		if j := l.jobs[job]; j != nil {
			j.known, j.last = false, lastState{}
		}
	}
}

// openRunOf returns the run entry this Ledger's claim of r wrote, if it
// remembers it.
func (l *tickLedger) openRunOf(r ledger.Run) (openRun, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if j := l.jobs[r.Job]; j != nil {
		for _, o := range j.open {
			if o.tick.Equal(r.Tick) && o.token == r.Token {
				return o, true
			}
		}
	}
	return openRun{}, false
}

// closeRun forgets the run entry at key of job.
func (l *tickLedger) closeRun(job, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if j := l.jobs[job]; j != nil {
		j.open = slices.DeleteFunc(j.open, func(r openRun) bool { return r.key == key })
	}
}

// lastRead is a job's "last" entry as read, or why it could not be used.
type lastRead struct {
	st  lastState
	err error
}

// readLast reads the "last" entries of jobs: one read-only transaction per
// opLimit jobs, sent at once. It remembers what it read.
func (l *tickLedger) readLast(ctx context.Context, jobs []string) ([]lastRead, error) {
	out := make([]lastRead, len(jobs))
	page := int(l.opLimit.Load())
	if len(jobs) <= page {
		return out, l.readLastPage(ctx, jobs, out)
	}
	var wg sync.WaitGroup
	errs := make([]error, (len(jobs)+page-1)/page)
	for p := range errs {
		from := p * page
		to := min(from+page, len(jobs))
		wg.Go(func() {
			errs[p] = l.readLastPage(ctx, jobs[from:to], out[from:to])
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (l *tickLedger) readLastPage(ctx context.Context, jobs []string, out []lastRead) error {
	ops := make(api.TxnOps, len(jobs))
	for i, job := range jobs {
		ops[i] = &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetOrEmpty, Key: l.lastKey(job)}}
	}
	ok, resp, err := l.txn(ctx, ops)
	if errors.Is(err, errTooManyOps) && l.lower(len(ops)) {
		res, err := l.readLast(ctx, jobs) // in smaller pages
		copy(out, res)
		return err
	}
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("transaction refused: %s", txnErrors(resp))
	}
	// One result per get, in order; match them by key all the same (an
	// ACL may filter some out).
	byKey := make(map[string]*api.KVPair, len(resp.Results))
	for _, r := range resp.Results {
		if r != nil && r.KV != nil {
			byKey[r.KV.Key] = r.KV
		}
	}
	for i, job := range jobs {
		key := l.lastKey(job)
		pair, found := byKey[key]
		switch {
		case !found:
			out[i].err = fmt.Errorf("%s missing from the transaction's results (an ACL may hide it)", key)
		case pair.ModifyIndex == 0: // get-or-empty of a key that does not exist
			l.saw(job, lastState{})
		default:
			var last lastClaim
			if err := json.Unmarshal(pair.Value, &last); err != nil {
				out[i].err = fmt.Errorf("decode %s: %w", key, err)
				continue
			}
			out[i].st = lastState{index: pair.ModifyIndex, tick: last.Tick, seq: last.Seq}
			l.saw(job, out[i].st)
		}
	}
	return nil
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

// claimChunk claims cs[idx] (at most MaxBatch, distinct jobs, one term
// with session sid) in one write transaction, or a few if other writers
// change some of their jobs meanwhile, and sets their errors. It returns
// the claims left undecided because the agent refused a transaction that
// large (the limit is lower now).
func (l *tickLedger) claimChunk(ctx context.Context, sid string, cs []ledger.Claim, idx []int, errs []error) []int {
	states := make(map[int]lastState, len(idx))
	var need []int // claims whose job's "last" entry must be read
	for _, i := range idx {
		if st, ok := l.known(cs[i].Job); ok {
			states[i] = st
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
	for {
		if len(need) > 0 {
			jobs := make([]string, len(need))
			for k, i := range need {
				jobs[k] = cs[i].Job
			}
			read, err := l.readLast(ctx, jobs)
			if err != nil {
				for _, i := range pending {
					errs[i] = fmt.Errorf("consul: claim %s at %v: read last: %w", cs[i].Job, cs[i].Tick, err)
				}
				decideRefused(false, "", err)
				return nil
			}
			for k, i := range need {
				if read[k].err != nil {
					errs[i] = fmt.Errorf("consul: claim %s at %v: %w", cs[i].Job, cs[i].Tick, read[k].err)
					pending = without(pending, i)
					continue
				}
				states[i] = read[k].st
			}
			need = nil
		}
		var send []int
		for _, i := range pending {
			if st := states[i]; st.index != 0 && !cs[i].Tick.After(st.tick) {
				refused[i] = st.tick
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

		ops := make(api.TxnOps, 0, 1+claimOps*len(send))
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: l.b.cfg.Key, Session: sid}})
		for _, i := range send {
			c, st := cs[i], states[i]
			lastRaw, err := json.Marshal(lastClaim{Tick: c.Tick, Token: c.Token, Instance: c.Instance, Seq: st.seq + 1})
			if err != nil {
				panic(err) // times and strings always encode
			}
			runRaw, err := json.Marshal(ledger.Run{Job: c.Job, Tick: c.Tick, Instance: c.Instance, Token: c.Token,
				CatchUp: c.CatchUp, Started: c.Started, Result: ledger.ResultRunning})
			if err != nil {
				panic(err)
			}
			ops = append(ops,
				&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: l.lastKey(c.Job), Value: lastRaw, Index: st.index}},
				&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: l.slotKey(c.Job, st.seq+1), Value: runRaw}})
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
				l.forget(cs[i].Job)
				errs[i] = fmt.Errorf("consul: claim %s at %v: %w", cs[i].Job, cs[i].Tick, err)
			}
			decideRefused(false, "", err)
			return nil
		}
		if ok {
			l.recordClaims(cs, send, states, resp)
			for _, i := range send {
				errs[i] = nil
			}
			decideRefused(false, "", nil)
			return nil
		}

		// Rolled back: nothing was written. Consul lists every operation
		// that failed.
		stale := false
		var conflicted, other []string
		var again []int
		for _, e := range resp.Errors {
			switch {
			case e.OpIndex == 0 && !strings.Contains(e.What, "Permission denied"):
				stale = true
			case e.OpIndex >= 1 && e.OpIndex < len(ops) && strings.HasSuffix(e.What, "index is stale"):
				i := send[(e.OpIndex-1)/claimOps]
				if !slices.Contains(again, i) {
					again = append(again, i)
					conflicted = append(conflicted, cs[i].Job)
				}
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
			for _, i := range send {
				errs[i] = fmt.Errorf("consul: claim %s at %v: transaction rolled back: %s", cs[i].Job, cs[i].Tick, txnErrors(resp))
			}
			decideRefused(false, "", fmt.Errorf("transaction rolled back: %s", txnErrors(resp)))
			return nil
		}
		// Another writer changed these jobs' "last" entries since they were
		// read: read them again, decide them, and send the rest again.
		termHeld = true
		l.forget(conflicted...)
		for _, i := range again {
			if conflicts[i]++; conflicts[i] >= claimAttempts {
				errs[i] = fmt.Errorf("consul: claim %s at %v: %s kept changing (%d attempts)", cs[i].Job, cs[i].Tick, l.lastKey(cs[i].Job), conflicts[i])
				pending = without(pending, i)
				continue
			}
			need = append(need, i)
		}
	}
}

// recordClaims remembers the entries a successful claim transaction
// wrote, with the ModifyIndexes Consul returned for them.
func (l *tickLedger) recordClaims(cs []ledger.Claim, send []int, states map[int]lastState, resp *api.TxnResponse) {
	index := make(map[string]uint64, len(resp.Results))
	for _, r := range resp.Results {
		if r != nil && r.KV != nil {
			index[r.KV.Key] = r.KV.ModifyIndex
		}
	}
	for _, i := range send {
		c := cs[i]
		seq := states[i].seq + 1
		lastKey, slot := l.lastKey(c.Job), l.slotKey(c.Job, seq)
		li, lok := index[lastKey]
		si, sok := index[slot]
		if !lok || !sok {
			l.forget(c.Job)
			continue
		}
		l.claimed(c.Job, lastState{index: li, tick: c.Tick, seq: seq}, openRun{tick: c.Tick, token: c.Token, key: slot, index: si})
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
		out[i] = r.st.tick
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("consul: last claimed: %w", err)
	}
	return out, nil
}

// Finish implements ledger.Ledger: it replaces a run's entry with r if the
// entry has r's tick and token (a CAS, not conditioned on the term). A run
// no longer in the history is not recorded again. r.Error is cut to 4 KiB.
// A run of the same job and tick as an earlier one of the call is refused
// (not sent) with an error of its own.
func (l *tickLedger) Finish(ctx context.Context, rs []ledger.Run) []error {
	errs := make([]error, len(rs))
	type runID struct {
		job  string
		tick string
	}
	first := make(map[runID]int, len(rs))
	var idx []int
	for i, r := range rs {
		id := runID{r.Job, r.Tick.UTC().Format(time.RFC3339Nano)}
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

// finishChunk finishes rs[idx] (at most MaxBatch) in one write
// transaction, after one read-only transaction for the runs whose entry
// this Ledger does not remember, and sets their errors.
func (l *tickLedger) finishChunk(ctx context.Context, rs []ledger.Run, idx []int, errs []error) {
	raws := make(map[int][]byte, len(idx))
	for _, i := range idx {
		r := rs[i]
		r.Error = truncate(r.Error, maxErrorBytes)
		raw, err := json.Marshal(r)
		if err != nil {
			panic(err) // times and strings always encode
		}
		raws[i] = raw
	}
	targets := make(map[int]openRun, len(idx))
	var need []int
	for _, i := range idx {
		if o, ok := l.openRunOf(rs[i]); ok {
			targets[i] = o
		} else {
			need = append(need, i)
		}
	}
	pending := idx
	conflicts := map[int]int{}
	for {
		if len(need) > 0 {
			found, err := l.findRuns(ctx, rs, need)
			for _, i := range need {
				switch o, ok := found[i]; {
				case err != nil:
					errs[i] = fmt.Errorf("consul: finish %s at %v: %w", rs[i].Job, rs[i].Tick, err)
					pending = without(pending, i)
				case !ok: // no entry with its tick and token: nothing to do
					errs[i] = nil
					pending = without(pending, i)
				default:
					targets[i] = o
				}
			}
			need = nil
		}
		if len(pending) == 0 {
			return
		}
		ops := make(api.TxnOps, len(pending))
		for k, i := range pending {
			ops[k] = &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: targets[i].key, Value: raws[i], Index: targets[i].index}}
		}
		ok, resp, err := l.txn(ctx, ops)
		if err != nil {
			for _, i := range pending {
				l.closeRun(rs[i].Job, targets[i].key)
				errs[i] = fmt.Errorf("consul: finish %s at %v: %w", rs[i].Job, rs[i].Tick, err)
			}
			return
		}
		if ok {
			for _, i := range pending {
				l.closeRun(rs[i].Job, targets[i].key)
				errs[i] = nil
			}
			return
		}
		var again []int
		var other bool
		for _, e := range resp.Errors {
			if e.OpIndex >= 0 && e.OpIndex < len(pending) && strings.HasSuffix(e.What, "index is stale") {
				again = append(again, pending[e.OpIndex])
			} else {
				other = true
			}
		}
		if other {
			for _, i := range pending {
				errs[i] = fmt.Errorf("consul: finish %s at %v: transaction rolled back: %s", rs[i].Job, rs[i].Tick, txnErrors(resp))
			}
			return
		}
		// The entry changed since its claim or lookup (finished again,
		// or overwritten by a later claim): look it up again.
		for _, i := range again {
			key := targets[i].key
			l.closeRun(rs[i].Job, key)
			delete(targets, i)
			if conflicts[i]++; conflicts[i] >= claimAttempts {
				errs[i] = fmt.Errorf("consul: finish %s at %v: %s kept changing (%d attempts)", rs[i].Job, rs[i].Tick, key, conflicts[i])
				pending = without(pending, i)
				continue
			}
			need = append(need, i)
		}
	}
}

// findRuns looks up the entries of rs[idx] by tick and token, listing
// their jobs' runs in one read-only transaction (at most opLimit jobs).
func (l *tickLedger) findRuns(ctx context.Context, rs []ledger.Run, idx []int) (map[int]openRun, error) {
	var ops api.TxnOps
	listed := map[string]bool{}
	for _, i := range idx {
		if p := l.runsPrefix(rs[i].Job); !listed[p] {
			listed[p] = true
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: p}})
		}
	}
	ok, resp, err := l.txn(ctx, ops)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("transaction refused: %s", txnErrors(resp))
	}
	byPrefix := map[string][]*api.KVPair{}
	for _, r := range resp.Results {
		if r == nil || r.KV == nil {
			continue
		}
		if cut := strings.LastIndex(r.KV.Key, "/runs/"); cut >= 0 {
			p := r.KV.Key[:cut+len("/runs/")]
			byPrefix[p] = append(byPrefix[p], r.KV)
		}
	}
	found := make(map[int]openRun, len(idx))
	for _, i := range idx {
		r := rs[i]
		for _, pair := range byPrefix[l.runsPrefix(r.Job)] {
			var old ledger.Run
			if json.Unmarshal(pair.Value, &old) == nil && old.Tick.Equal(r.Tick) && old.Token == r.Token {
				found[i] = openRun{tick: r.Tick, token: r.Token, key: pair.Key, index: pair.ModifyIndex}
				break
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

// History implements ledger.Ledger: one read of the job's runs.
func (l *tickLedger) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	if n <= 0 {
		return nil, nil
	}
	pairs, _, err := l.b.cfg.Client.KV().List(l.runsPrefix(job), (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("consul: history %s: %w", job, err)
	}
	runs := make([]ledger.Run, 0, len(pairs))
	var errs []error
	for _, p := range pairs {
		var r ledger.Run
		if err := json.Unmarshal(p.Value, &r); err != nil {
			errs = append(errs, fmt.Errorf("decode %s: %w", p.Key, err))
			continue
		}
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b ledger.Run) int { return b.Tick.Compare(a.Tick) }) // newest first
	runs = runs[:min(n, len(runs))]
	if err := errors.Join(errs...); err != nil {
		return runs, fmt.Errorf("consul: history %s: %w", job, err)
	}
	return runs, nil
}
