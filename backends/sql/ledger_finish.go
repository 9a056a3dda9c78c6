package sql

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/ledger"
)

// finishItem is one valid Finish, converted for the statements.
type finishItem struct {
	i      int // index in the caller's slice
	job    string
	tick   int64 // unix nanoseconds
	token  int64
	ended  time.Time // zero: NULL
	result string
	msg    string
	tries  int64 // Run.Attempts
}

// Finish implements ledger.Ledger: it sets Ended (NULL if zero), Result,
// Error and Attempts of the run with r's Job, Tick and Token; the other fields keep
// their claimed values. A run no longer in the history (trimmed, or never
// claimed) is left alone and is not an error. One statement per MaxBatch
// runs, each locking its rows in the order of job and tick. If rs holds
// the same run twice, the later one is stored, as two calls in a row
// would, and both get its error.
func (l *tickLedger) Finish(ctx context.Context, rs []ledger.Run) []error {
	b := l.b
	errs := make([]error, len(rs))
	type runKey struct {
		job         string
		tick, token int64
	}
	keys := make([]runKey, len(rs))
	sent := map[runKey]finishItem{} // the last run of each key
	for i, r := range rs {
		tick, err := tickNanos(r.Job, r.Tick)
		if err != nil {
			errs[i] = err
			continue
		}
		if r.Token > math.MaxInt64 {
			errs[i] = fmt.Errorf("sql: finish %s at %v: %w: token %d", r.Job, r.Tick, ErrInvalidName, r.Token)
			continue
		}
		if checkJob(r.Job) != nil {
			continue // never claimed: nothing to finish
		}
		msg := cleanText(r.Error)
		if len(msg) > maxErrorLen {
			msg = truncateUTF8(msg, maxErrorLen)
		}
		var ended time.Time
		if !r.Ended.IsZero() {
			ended = r.Ended.UTC().Truncate(time.Microsecond)
		}
		keys[i] = runKey{l.jobKey(r.Job), tick, int64(r.Token)}
		sent[keys[i]] = finishItem{i: i, job: r.Job, tick: tick, token: int64(r.Token), ended: ended,
			result: cleanText(string(r.Result)), msg: msg, tries: int64(max(0, min(r.Attempts, math.MaxInt32)))}
	}
	items := slices.SortedFunc(maps.Values(sent), func(x, y finishItem) int {
		return cmp.Or(strings.Compare(x.job, y.job), cmp.Compare(x.tick, y.tick), cmp.Compare(x.token, y.token))
	})
	n := (len(items) + l.MaxBatch() - 1) / l.MaxBatch()
	parallel(n, func(k int) {
		chunk := items[k*l.MaxBatch() : min((k+1)*l.MaxBatch(), len(items))]
		if err := l.finishChunk(ctx, chunk); err != nil {
			for _, it := range chunk {
				errs[it.i] = refused(b.wrap(fmt.Sprintf("finish %s at %v", rs[it.i].Job, rs[it.i].Tick), err))
			}
		}
	})
	// A run given twice: the earlier copies share the later one's fate.
	for i := range rs {
		if it, ok := sent[keys[i]]; ok && it.i != i && errs[i] == nil {
			errs[i] = errs[it.i]
		}
	}
	return errs
}

// finishChunk stores one round trip of outcomes, sorted by job and tick.
func (l *tickLedger) finishChunk(ctx context.Context, items []finishItem) error {
	b := l.b
	done, err := l.slot(ctx)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		var err error
		if b.drv.Dialect == Postgres {
			err = l.finishPG(ctx, items)
		} else {
			err = l.finishMySQL(ctx, items)
		}
		if attempt < 3 && err != nil && ctx.Err() == nil && b.drv.claimConflict(err) {
			b.log.Warn("ledger finish conflict, retrying", "runs", len(items), "attempt", attempt+1, "err", err)
			continue // a deadlock (with a claim's trim): retry
		}
		return err
	}
}

func truncateUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 { // do not cut a rune
		n--
	}
	return s[:n]
}
