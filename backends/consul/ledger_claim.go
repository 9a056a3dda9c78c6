package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/ledger"
)

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
	return ledger.MarkRefused(errs, denied)
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

func without(s []int, v int) []int {
	return slices.DeleteFunc(slices.Clone(s), func(x int) bool { return x == v })
}
