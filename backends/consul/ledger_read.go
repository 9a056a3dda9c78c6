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
