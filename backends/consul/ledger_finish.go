package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/ledger"
)

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
	return ledger.MarkRefused(errs, denied)
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

// denied reports whether the agent refused the caller: a 403 (an ACL
// token without the permission, or one it does not know) or a 401.
func denied(err error) bool {
	var se api.StatusError
	if errors.As(err, &se) {
		return se.Code == 403 || se.Code == 401
	}
	msg := err.Error()
	return strings.Contains(msg, "Permission denied") || strings.Contains(msg, "ACL not found") ||
		strings.Contains(msg, "Unexpected response code: 403")
}
