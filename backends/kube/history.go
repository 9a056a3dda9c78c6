package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/batonhq/baton/ledger"
)

// A job's runs live in two ConfigMaps. Its entry in its ledger shard
// holds its newest runs: a claim adds its run there, a finish updates
// it there. When a finish leaves the entry with more than moveAt runs,
// the finished runs after the newest keepRecent move to the job's entry
// in its history shard: one write adds them there (replacing an earlier
// copy of the same run), one more removes them from the ledger entry,
// each run only if it is still the copy that was moved. So a claim
// rewrites a few runs per job whatever History is, and each history
// shard is written once every few instants rather than at every one.
//
// A move that stops between its two writes leaves a run in both shards.
// History takes the ledger entry's copy, which a finish updates first;
// the next move replaces the history shard's copy.

// keepRecent is how many runs a move leaves in a ledger entry.
const keepRecent = 1

// moveAt is how many runs a job's entry in ledger shard n holds before a
// finish moves the older finished ones: 3 to 6, by shard, so that when
// every job is due at the same instants the history shards are not all
// written at the same one.
func moveAt(n int) int { return keepRecent + 2 + n%4 }

// Finish implements ledger.Ledger: one write per ledger shard, not
// conditioned on the term; a run that was moved already is finished in
// its history shard.
func (l *tickLedger) Finish(ctx context.Context, rs []ledger.Run) []error {
	errs := make([]error, len(rs))
	eachShard(byShard(len(rs), func(i int) string { return rs[i].Job }), func(n int, idx []int) {
		var missing []int
		var moves map[int]map[string]jobRec // by history shard, then key
		var full bool
		shard := l.b.ledgerShard(n)
		err := l.b.cas(ctx, shard, 0, noFence, func(data map[string]any) (bool, error) {
			missing, moves = nil, map[int]map[string]jobRec{}
			finished := map[string]jobRec{}
			changed := false
			for _, i := range idx {
				key, r, found, err := finishEntry(data, rs[i])
				if err != nil {
					return false, err
				}
				if !found {
					missing = append(missing, i)
					continue
				}
				changed = true
				finished[key] = r
			}
			full = dataSize(data) > maxObjectBytes/2
			for key, r := range finished {
				if m := movable(r, n, full); len(m) > 0 {
					_, _, h := jobKey(r.Job)
					if moves[h] == nil {
						moves[h] = map[string]jobRec{}
					}
					moves[h][key] = jobRec{Job: r.Job, Runs: m}
				}
			}
			return changed, nil
		})
		if err != nil {
			err = refused(fmt.Errorf("kube: finish %d runs in %s: %w", len(idx), shard, err))
			for _, i := range idx {
				errs[i] = err
			}
			return
		}
		if len(missing) > 0 {
			l.finishMoved(ctx, rs, missing, errs)
		}
		if len(moves) > 0 {
			if err := l.move(ctx, n, moves, full); err != nil {
				l.b.log.Warn("moving finished runs to history failed", "shard", shard, "dropped", full, "err", err)
			}
		}
	})
	return errs
}

// finishEntry stores f's outcome in its job's entry in data, if the entry
// holds its run, and returns the entry's key and the entry.
func finishEntry(data map[string]any, f ledger.Run) (key string, r jobRec, found bool, err error) {
	key, _, _ = jobKey(f.Job)
	if r, err = record(data, key, f.Job); err != nil || !finishIn(r.Runs, f) {
		return key, r, false, err
	}
	return key, r, true, store(data, key, r)
}

// finishIn stores f's outcome in its run among runs, if there, and says
// whether it was.
func finishIn(runs []runRec, f ledger.Run) bool {
	for j, run := range runs {
		if run.Tick == f.Tick.UnixNano() && run.Token == f.Token {
			runs[j] = runRec{Tick: run.Tick, Token: run.Token, Instance: strings.ToValidUTF8(f.Instance, "\uFFFD"), CatchUp: f.CatchUp,
				Started: unixNano(f.Started), Ended: unixNano(f.Ended), Result: string(f.Result), Error: truncError(f.Error), Attempts: f.Attempts}
			return true
		}
	}
	return false
}

// movable returns the runs a move takes from r, a job's entry in ledger
// shard n: none until it holds more than moveAt(n) runs or the shard is
// full (past half its bound), then the finished ones after the newest
// keepRecent.
func movable(r jobRec, n int, full bool) []runRec {
	if len(r.Runs) <= moveAt(n) && !full {
		return nil
	}
	var out []runRec
	for _, run := range r.Runs[keepRecent:] {
		if run.Result != string(ledger.ResultRunning) {
			out = append(out, run)
		}
	}
	return out
}

// finishMoved finishes rs[missing...], which their ledger entries no
// longer hold, in their history shards, and sets their errors; a run it
// does not find there either was trimmed (or never claimed), and is left.
func (l *tickLedger) finishMoved(ctx context.Context, rs []ledger.Run, missing []int, errs []error) {
	groups := map[int][]int{}
	for _, i := range missing {
		_, _, h := jobKey(rs[i].Job)
		groups[h] = append(groups[h], i)
	}
	for h, idx := range groups {
		shard := l.b.historyShard(h)
		err := l.b.cas(ctx, shard, 0, noFence, func(data map[string]any) (bool, error) {
			changed := false
			for _, i := range idx {
				_, _, found, err := finishEntry(data, rs[i])
				if err != nil {
					return false, err
				}
				changed = changed || found
			}
			return changed, nil
		})
		if err != nil {
			err = refused(fmt.Errorf("kube: finish %d runs in %s: %w", len(idx), shard, err))
			for _, i := range idx {
				errs[i] = err
			}
		}
	}
}

// move adds the runs of moves (by history shard, then job key) to their
// jobs' entries in the history shards, then removes them from the
// entries in ledger shard n, each run only if the entry holds the same
// copy still (a finish may have updated it meanwhile: it then stays, and
// moves later). A history shard's write that fails leaves its runs in
// the ledger shard, unless the ledger shard is full: then they are
// dropped, for a full ledger shard would refuse the next claims (fenced.go's
// bound), and running the jobs matters more than their past runs.
func (l *tickLedger) move(ctx context.Context, n int, moves map[int]map[string]jobRec, full bool) error {
	var errs []error
	for h, jobs := range moves {
		err := l.b.cas(ctx, l.b.historyShard(h), 0, noFence, func(data map[string]any) (bool, error) {
			for key, m := range jobs {
				r, err := record(data, key, m.Job)
				if err != nil {
					return false, err
				}
				r.Last, r.Runs = 0, mergeRuns(m.Runs, r.Runs, l.b.history)
				if err := store(data, key, r); err != nil {
					return false, err
				}
			}
			return true, nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.b.historyShard(h), err))
			if !full {
				delete(moves, h)
			}
		}
	}
	if len(moves) == 0 {
		return errors.Join(errs...)
	}
	err := l.b.cas(ctx, l.b.ledgerShard(n), 0, noFence, func(data map[string]any) (bool, error) {
		changed := false
		for _, jobs := range moves {
			for key, m := range jobs {
				r, err := record(data, key, m.Job)
				if err != nil {
					return false, err
				}
				kept := make([]runRec, 0, len(r.Runs))
				for _, run := range r.Runs {
					if !slices.Contains(m.Runs, run) {
						kept = append(kept, run)
					}
				}
				if len(kept) == len(r.Runs) {
					continue
				}
				r.Runs = kept
				if err := store(data, key, r); err != nil {
					return false, err
				}
				changed = true
			}
		}
		return changed, nil
	})
	return errors.Join(append(errs, err)...)
}

// mergeRuns returns the runs of newer and older, newest tick first, at
// most limit: of two copies of one run (the same tick and token), the
// one in newer.
func mergeRuns(newer, older []runRec, limit int) []runRec {
	out := slices.Clone(newer)
	for _, run := range older {
		if !slices.ContainsFunc(newer, func(o runRec) bool { return o.Tick == run.Tick && o.Token == run.Token }) {
			out = append(out, run)
		}
	}
	slices.SortStableFunc(out, func(a, b runRec) int {
		switch {
		case a.Tick > b.Tick:
			return -1
		case a.Tick < b.Tick:
			return 1
		}
		return 0
	})
	return out[:min(len(out), limit)]
}

// History implements ledger.Ledger: it reads the job's ledger shard and
// its history shard.
func (l *tickLedger) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	if n <= 0 {
		return nil, nil
	}
	key, ln, hn := jobKey(job)
	var recs [2]jobRec
	for i, shard := range []string{l.b.ledgerShard(ln), l.b.historyShard(hn)} {
		o, err := l.b.c.get(ctx, configMaps, l.b.ns, shard)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kube: read history of %q: %w", job, err)
		}
		if recs[i], err = record(o.section("data"), key, job); err != nil {
			return nil, err
		}
	}
	merged := mergeRuns(recs[0].Runs, recs[1].Runs, min(n, l.b.history))
	runs := make([]ledger.Run, 0, len(merged))
	for _, run := range merged {
		runs = append(runs, run.run(job))
	}
	return runs, nil
}
