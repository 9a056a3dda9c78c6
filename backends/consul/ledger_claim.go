package consul

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

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

func without(s []int, v int) []int {
	return slices.DeleteFunc(slices.Clone(s), func(x int) bool { return x == v })
}
