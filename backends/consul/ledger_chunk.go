package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/ledger"
)

// claimChunk claims cs[idx] (at most MaxBatch, distinct jobs, one term
// with session sid) in one write transaction, or a few if other writers
// change some of their jobs meanwhile, and sets their errors. It returns
// the claims left undecided because the agent refused a transaction that
// large (the limit is lower now).
//
// Each round reads the "last" entries not known (read), sets aside the
// claims whose tick is not after their job's last one (sortOut), puts in
// the ring the runs "last" cannot carry (flush), and writes the rest in
// one transaction conditioned on the term (write).
func (l *tickLedger) claimChunk(ctx context.Context, sid string, cs []ledger.Claim, idx []int, errs []error) []int {
	c := &chunkClaim{l: l, sid: sid, cs: cs, idx: idx, errs: errs,
		states:    make(map[int]knownEntry, len(idx)),
		pending:   idx,
		refused:   map[int]time.Time{},
		conflicts: map[int]int{},
	}
	for _, i := range idx {
		if e, index, ok := l.knownLast(cs[i].Job); ok {
			c.states[i] = knownEntry{e, index}
		} else {
			c.need = append(c.need, i)
		}
	}
	for {
		if len(c.need) > 0 && !c.read(ctx) {
			return nil
		}
		send := c.sortOut()
		if len(send) == 0 {
			c.decideUnsent(ctx)
			return nil
		}
		next, send := c.flush(ctx, send)
		if len(send) == 0 {
			continue
		}
		if redo, done := c.write(ctx, send, next); done {
			return redo
		}
	}
}

// knownEntry is a job's "last" entry and its ModifyIndex (0: none).
type knownEntry struct {
	last  lastEntry
	index uint64
}

// chunkClaim is the state of one claimChunk call across its rounds.
type chunkClaim struct {
	l    *tickLedger
	sid  string
	cs   []ledger.Claim
	idx  []int
	errs []error

	states    map[int]knownEntry
	need      []int             // claims whose job's "last" entry must be read
	pending   []int             // not decided yet
	refused   map[int]time.Time // tick not after the last one: ErrTickClaimed once the term is checked
	conflicts map[int]int
	// termHeld: a write of this chunk was rolled back on CAS failures
	// alone, so its check-session passed: the term held then.
	termHeld bool
}

// decideRefused sets the errors of the claims refused on their ticks:
// err if not nil, else stale (for why), else ErrTickClaimed.
func (c *chunkClaim) decideRefused(stale bool, why string, err error) {
	for i, last := range c.refused {
		switch {
		case err != nil:
			c.errs[i] = fmt.Errorf("consul: claim %s at %v: %w", c.cs[i].Job, c.cs[i].Tick, err)
		case stale:
			c.errs[i] = staleClaim(c.cs[i], why)
		default:
			c.errs[i] = tickClaimed(c.cs[i], last)
		}
	}
}

// fail sets the error of each claim of is.
func (c *chunkClaim) fail(is []int, format string, a ...any) {
	for _, i := range is {
		c.errs[i] = fmt.Errorf("consul: claim %s at %v: %w", c.cs[i].Job, c.cs[i].Tick, fmt.Errorf(format, a...))
	}
}

// read reads the "last" entries of the claims in need, in one call. It
// returns false when the read failed: every claim is decided then.
func (c *chunkClaim) read(ctx context.Context) bool {
	jobs := make([]string, len(c.need))
	for k, i := range c.need {
		jobs[k] = c.cs[i].Job
	}
	read, err := c.l.readLast(ctx, jobs)
	if err != nil {
		c.fail(c.pending, "read last: %w", err)
		c.decideRefused(false, "", err)
		return false
	}
	for k, i := range c.need {
		if read[k].err != nil {
			c.fail([]int{i}, "%w", read[k].err)
			c.pending = without(c.pending, i)
			continue
		}
		c.states[i] = knownEntry{read[k].last, read[k].index}
	}
	c.need = nil
	return true
}

// sortOut moves the pending claims whose tick is not after their job's
// last one to refused and returns the others, pending from now on.
func (c *chunkClaim) sortOut() []int {
	var send []int
	for _, i := range c.pending {
		if st := c.states[i]; st.index != 0 && !c.cs[i].Tick.After(st.last.Tick) {
			c.refused[i] = st.last.Tick
		} else {
			send = append(send, i)
		}
	}
	c.pending = send
	return send
}

// decideUnsent decides the claims refused on their ticks when none is
// left to send.
func (c *chunkClaim) decideUnsent(ctx context.Context) {
	if len(c.refused) > 0 && c.termHeld {
		c.decideRefused(false, "", nil)
	} else if len(c.refused) > 0 {
		// Refused on their ticks: a stale term is said first all
		// the same, as a write would.
		stale, err := c.l.checkSession(ctx, c.sid)
		if stale {
			c.l.dropSession(c.cs[c.idx[0]].Token, nil)
		}
		c.decideRefused(stale, "session "+c.sid+" no longer holds "+c.l.b.cfg.Key, err)
	}
}

// flush makes the next "last" entry of each claim of send and puts in
// the ring the runs beyond what "last" carries. It returns the entries
// and send without the claims whose runs it could not put there (their
// errors set).
func (c *chunkClaim) flush(ctx context.Context, send []int) (map[int]lastEntry, []int) {
	next := make(map[int]lastEntry, len(send))
	var flush []slotWrite
	var flushOf []int
	for _, i := range send {
		e, over := c.l.nextEntry(c.cs[i], c.states[i].last)
		next[i] = e
		for _, p := range over {
			raw, err := json.Marshal(ringRun{Seq: p.Seq, Run: p.run(c.cs[i].Job)})
			if err != nil {
				panic(err) // times and strings always encode
			}
			flush = append(flush, slotWrite{job: c.cs[i].Job, seq: p.Seq, tick: p.Tick, token: p.Token, raw: raw})
			flushOf = append(flushOf, i)
		}
	}
	if len(flush) > 0 {
		// More runs going than "last" carries: the oldest go to the
		// ring first (not conditioned on the term: they were claimed).
		for k, err := range c.l.writeSlots(ctx, flush) {
			if i := flushOf[k]; err != nil && slices.Contains(send, i) {
				c.fail([]int{i}, "copy run %d to the ring: %w", flush[k].seq, err)
				send, c.pending = without(send, i), without(c.pending, i)
			}
		}
	}
	return next, send
}

// write sends the next entries of send in one transaction that checks
// the term's session first. done is true when the chunk is over: every
// claim decided, or redo is what the agent refused as too large; false
// when another writer changed some of the jobs (in need now).
func (c *chunkClaim) write(ctx context.Context, send []int, next map[int]lastEntry) (redo []int, done bool) {
	l := c.l
	ops := make(api.TxnOps, 0, 1+len(send))
	ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: l.b.cfg.Key, Session: c.sid}})
	for _, i := range send {
		raw, err := json.Marshal(next[i])
		if err != nil {
			panic(err)
		}
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: l.lastKey(c.cs[i].Job), Value: raw, Index: c.states[i].index}})
	}
	ok, resp, err := l.txn(ctx, ops)
	if errors.Is(err, errTooManyOps) && l.lower(len(ops)) {
		redo := slices.Clone(send)
		for i := range c.refused {
			redo = append(redo, i)
		}
		return redo, true
	}
	if err != nil {
		// Applied or not: what we know of these jobs may be stale.
		for _, i := range send {
			l.forgetLast(c.cs[i].Job)
		}
		c.fail(send, "%w", err)
		c.decideRefused(false, "", err)
		return nil, true
	}
	if ok {
		index := make(map[string]uint64, len(resp.Results))
		for _, r := range resp.Results {
			if r != nil && r.KV != nil {
				index[r.KV.Key] = r.KV.ModifyIndex
			}
		}
		for _, i := range send {
			if ix, found := index[l.lastKey(c.cs[i].Job)]; found {
				l.sawLast(c.cs[i].Job, next[i], ix)
			} else {
				l.forgetLast(c.cs[i].Job)
			}
			c.errs[i] = nil
		}
		c.decideRefused(false, "", nil)
		return nil, true
	}
	return nil, c.rolledBack(send, len(ops), resp)
}

// rolledBack decides a transaction of nOps operations writing send that
// Consul rolled back (nothing was written): it returns false when only
// CAS checks failed, the claims to read again put in need.
func (c *chunkClaim) rolledBack(send []int, nOps int, resp *api.TxnResponse) bool {
	l := c.l
	// Consul lists every operation that failed.
	stale := false
	var again []int
	var other []string
	for _, e := range resp.Errors {
		switch {
		case e.OpIndex == 0 && !strings.Contains(e.What, "Permission denied"):
			stale = true
		case e.OpIndex >= 1 && e.OpIndex < nOps && strings.HasSuffix(e.What, "index is stale"):
			again = append(again, send[e.OpIndex-1])
		default:
			other = append(other, e.What)
		}
	}
	if stale {
		l.dropSession(c.cs[c.idx[0]].Token, nil)
		why := fmt.Sprintf("session %s no longer holds %s", c.sid, l.b.cfg.Key)
		for _, i := range send {
			c.errs[i] = staleClaim(c.cs[i], why)
		}
		c.decideRefused(true, why, nil)
		return true
	}
	if len(other) > 0 {
		err := fmt.Errorf("transaction rolled back: %s", txnErrors(resp))
		c.fail(send, "%w", err)
		c.decideRefused(false, "", err)
		return true
	}
	// Another writer changed these jobs' "last" entries since they were
	// read: read them again, decide them, and send the rest again.
	c.termHeld = true
	for _, i := range again {
		l.forgetLast(c.cs[i].Job)
		if c.conflicts[i]++; c.conflicts[i] >= casAttempts {
			c.fail([]int{i}, "%s kept changing (%d attempts)", l.lastKey(c.cs[i].Job), c.conflicts[i])
			c.pending = without(c.pending, i)
			continue
		}
		c.need = append(c.need, i)
	}
	return false
}
