package sql

import (
	"cmp"
	"context"
	dbsql "database/sql"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/batonhq/baton/ledger"
)

// LastClaimed implements ledger.Ledger: one query per MaxBatch distinct
// jobs. A job that cannot exist (an invalid name) was never claimed.
func (l *tickLedger) LastClaimed(ctx context.Context, jobs []string) ([]time.Time, error) {
	b := l.b
	var keys []string
	seen := map[string]bool{}
	for _, job := range jobs {
		if k := l.jobKey(job); !seen[k] && checkJob(job) == nil {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var (
		mu    sync.Mutex
		last  = make(map[string]int64, len(keys))
		first error
	)
	n := (len(keys) + l.MaxBatch() - 1) / l.MaxBatch()
	parallel(n, func(k int) {
		page := keys[k*l.MaxBatch() : min((k+1)*l.MaxBatch(), len(keys))]
		got, err := l.lastClaimedPage(ctx, page)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			first = cmp.Or(first, b.wrap(fmt.Sprintf("last claimed ticks of %d jobs", len(page)), err))
		}
		for job, tick := range got {
			last[l.jobKey(job)] = tick
		}
	})
	if first != nil {
		return nil, first
	}
	out := make([]time.Time, len(jobs))
	for i, job := range jobs {
		if n, ok := last[l.jobKey(job)]; ok {
			out[i] = time.Unix(0, n).UTC()
		}
	}
	return out, nil
}

// lastClaimedPage reads the last ticks of jobs in one query.
func (l *tickLedger) lastClaimedPage(ctx context.Context, jobs []string) (map[string]int64, error) {
	b := l.b
	done, err := l.slot(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
	defer cancel()
	var rows *dbsql.Rows
	if b.drv.Dialect == Postgres {
		var a pgArray
		for _, job := range jobs {
			a.text(job)
		}
		rows, err = b.cfg.DB.QueryContext(ctx, b.q.lastClaimed, b.cfg.Election, a.String())
	} else {
		args := make([]any, 0, 1+len(jobs))
		args = append(args, b.cfg.Election)
		for _, job := range jobs {
			args = append(args, job)
		}
		rows, err = b.cfg.DB.QueryContext(ctx, mysqlLastClaimed(b.cfg.Table, len(jobs)), args...)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]int64, len(jobs))
	for rows.Next() {
		var job string
		var tick int64
		if err := rows.Scan(&job, &tick); err != nil {
			return nil, err
		}
		out[job] = tick
	}
	return out, rows.Err()
}

// History implements ledger.Ledger: up to n runs of job, newest
// tick first.
func (l *tickLedger) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	b := l.b
	if n <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
	defer cancel()
	rows, err := b.cfg.DB.QueryContext(ctx, b.q.history, b.cfg.Election, job, n)
	if err != nil {
		return nil, b.wrap("history of "+job, err)
	}
	defer rows.Close()
	var out []ledger.Run
	for rows.Next() {
		var (
			r              = ledger.Run{Job: job}
			tick, token    int64
			started        int64
			ended          dbsql.NullInt64
			result, errMsg string
		)
		if err := rows.Scan(&tick, &r.Instance, &token, &r.CatchUp, &started, &ended, &result, &errMsg, &r.Attempts); err != nil {
			return nil, b.wrap("history of "+job, err)
		}
		r.Tick = time.Unix(0, tick).UTC()
		r.Token = uint64(token)
		r.Started = time.UnixMicro(started).UTC()
		if ended.Valid {
			r.Ended = time.UnixMicro(ended.Int64).UTC()
		}
		r.Result, r.Error = ledger.Result(result), errMsg
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, b.wrap("history of "+job, err)
	}
	return out, nil
}
