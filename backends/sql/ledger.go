package sql

import (
	"cmp"
	"context"
	dbsql "database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton/ledger"
)

// Ledger returns the ledger.Ledger of b's election, kept in the
// tables Table_ticks and Table_runs of the same database (see the schema
// files). It is safe for concurrent use.
//
// Round trips: Claim and Finish carry MaxBatch (500) items per round
// trip: on PostgreSQL one statement; on MySQL, for Claim, one transaction
// of at most seven statements (two when every tick is claimed already),
// for Finish one statement. LastClaimed reads MaxBatch jobs per query,
// History is one query. Each round trip is bounded by ctx and
// Config.QueryTimeout. A Backend runs at most two ledger round trips at
// once (the chunks of a call, and concurrent calls, queue for them), so
// keep at least three idle connections in the pool with the renewals
// (DB.SetMaxIdleConns). The chunks of a call hold disjoint sets of jobs,
// and every round trip locks its rows in the order of their jobs, so
// that they never deadlock one another; a deadlock with another writer
// is retried.
//
// Rows: Table_ticks holds one row per job claimed, about 120 bytes with
// short names on PostgreSQL (row and primary key index) and 80 on MySQL;
// Table_runs up to Config.History rows per job, about 150 bytes each on
// PostgreSQL and 90 on MySQL; add to each row the lengths of the election
// and job names (twice on PostgreSQL, in the row and in the index), and
// to a run those of its instance name and error text (cut at 8 KiB).
// With the default History of 20, 1,000 jobs take about 3 MB on
// PostgreSQL (more between vacuums) and 2 MB on MySQL. Each claim deletes
// its job's runs beyond History in the same round trip.
//
// Ticks are stored as unix nanoseconds, so a tick round-trips exactly
// (times between the years 1678 and 2262); the instant is kept, the
// location is not (ticks come back in UTC). Started and Ended are stored
// with microsecond precision. Job names must be valid UTF-8 without NUL
// bytes; an instance name or error text that is not is stored with the
// offending bytes replaced.
func (b *Backend) Ledger() ledger.Ledger { return &tickLedger{b: b} }

type tickLedger struct{ b *Backend }

var _ ledger.Ledger = (*tickLedger)(nil)

// maxErrorLen bounds the error text stored with a run, in bytes.
const maxErrorLen = 8 << 10

// Claims (and finishes, and jobs read by LastClaimed) per round trip.
// The cost of a claim hardly depends on the chunk's size above 100 (the
// statement's fixed cost is a small part of it: on a loaded 2-core
// machine, 1,000 claims took the same time in chunks of 100, 250, 500
// or 1,000), while a chunk holds its rows' locks, and the lease row's
// share lock that a renewal waits for, until it commits. 500 keeps a
// chunk to tens of milliseconds (a claim cost about 50 µs on PostgreSQL
// and 100 µs on MariaDB on that machine, busy with other work) and lets
// the two round trips in flight share the work of an instant of 1,000
// jobs.
const (
	maxBatchPG    = 500
	maxBatchMySQL = 500
)

// ledgerParallel bounds how many ledger round trips of one Backend run at
// once, whichever calls they belong to: the chunks of one Claim, and the
// Host's concurrent calls of one instant, queue for them. Two, because a
// database/sql pool keeps two idle connections unless told otherwise
// (SetMaxIdleConns): with four at once, every instant closed and reopened
// connections (and PostgreSQL prepared the statement again on each), and
// 10,000 claims took twice as long as with two on a 2-core machine; with
// the idle connections raised to 8, four at once were no faster than two.
const ledgerParallel = 2

// MaxBatch implements ledger.Ledger.
func (l *tickLedger) MaxBatch() int {
	if l.b.drv.Dialect == MySQL {
		return maxBatchMySQL
	}
	return maxBatchPG
}

// tickNanos converts a tick to unix nanoseconds, refusing times that do
// not fit.
func tickNanos(job string, tick time.Time) (int64, error) {
	n := tick.UnixNano()
	if tick.IsZero() || !time.Unix(0, n).Equal(tick) {
		return 0, fmt.Errorf("sql: job %q: %w: tick %v outside the years 1678-2262", job, ErrInvalidName, tick)
	}
	return n, nil
}

// checkJob refuses a job name the tables cannot hold, or that would fail
// the whole statement carrying it (a NUL byte or invalid UTF-8).
func checkJob(job string) error {
	if job == "" || utf8.RuneCountInString(job) > MaxNameLen {
		return fmt.Errorf("sql: %w: job %q: want 1 to %d characters", ErrInvalidName, job, MaxNameLen)
	}
	if !utf8.ValidString(job) || strings.ContainsRune(job, 0) {
		return fmt.Errorf("sql: %w: job %q: not valid UTF-8, or holds a NUL byte", ErrInvalidName, job)
	}
	return nil
}

// cleanText makes informational text (an instance name, a run's error)
// storable in both dialects: valid UTF-8 without NUL bytes.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// jobKey is the identity of a job name in the dialect's primary key:
// exact on PostgreSQL; on MySQL, whose utf8mb4_bin compares with PAD
// SPACE, trailing spaces do not count ("a" and "a " are one row).
func (l *tickLedger) jobKey(job string) string {
	if l.b.drv.Dialect == MySQL {
		return strings.TrimRight(job, " ")
	}
	return job
}

// claimItem is one valid claim, converted for the statements.
type claimItem struct {
	i        int // index in the caller's slice
	job      string
	tick     int64 // unix nanoseconds
	instance string
	catchUp  bool
	started  time.Time // UTC, microseconds
}

// claimChunk is the answer of one claim round trip: stale (every claim
// refused, nothing recorded), or whether each item was claimed.
type claimChunk struct {
	stale   bool
	claimed []bool
}

// Claim implements ledger.Ledger. Claims are checked, duplicates of a job
// already in cs are refused (an error that is neither sentinel: the
// Host's retry of such a claim, alone, gets the real answer), and the
// rest are sorted by job and sent MaxBatch per round trip: on PostgreSQL
// one statement, on MySQL one READ COMMITTED transaction. Either way the
// lease row is share-locked first and must hold the token and be live by
// the database clock; a takeover waits for the claims to commit, and
// claims wait for a takeover in progress, then fail. A stale round trip
// refuses all of its claims with an error wrapping ledger.ErrStaleTerm;
// the Host then ends its term (the database knows before the renew loop
// does).
func (l *tickLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	b := l.b
	errs := make([]error, len(cs))
	byToken := map[uint64][]claimItem{}
	var tokens []uint64
	first := map[string]int{}
	for i, c := range cs {
		if err := checkJob(c.Job); err != nil {
			errs[i] = err
			continue
		}
		tick, err := tickNanos(c.Job, c.Tick)
		if err != nil {
			errs[i] = err
			continue
		}
		if c.Token == 0 || c.Token > math.MaxInt64 {
			errs[i] = fmt.Errorf("sql: claim %s at %v: %w: token %d", c.Job, c.Tick, ErrInvalidName, c.Token)
			continue
		}
		key := l.jobKey(c.Job)
		if j, dup := first[key]; dup {
			errs[i] = fmt.Errorf("sql: claim %s at %v: not sent: claim %d of the same call is of job %q", c.Job, c.Tick, j, cs[j].Job)
			continue
		}
		first[key] = i
		started := c.Started
		if started.IsZero() {
			started = b.cfg.wallNow() // informational only
		}
		if _, ok := byToken[c.Token]; !ok {
			tokens = append(tokens, c.Token)
		}
		byToken[c.Token] = append(byToken[c.Token], claimItem{i: i, job: c.Job, tick: tick, instance: cleanText(c.Instance),
			catchUp: c.CatchUp, started: started.UTC().Truncate(time.Microsecond)})
	}

	// Chunks over disjoint, sorted ranges of jobs: each round trip locks
	// its tick rows in job order, and no two chunks of this call share a
	// row.
	type chunk struct {
		token uint64
		items []claimItem
	}
	var chunks []chunk
	for _, tok := range tokens {
		items := byToken[tok]
		slices.SortFunc(items, func(x, y claimItem) int { return strings.Compare(x.job, y.job) })
		for from := 0; from < len(items); from += l.MaxBatch() {
			chunks = append(chunks, chunk{tok, items[from:min(from+l.MaxBatch(), len(items))]})
		}
	}
	parallel(len(chunks), func(k int) {
		ch := chunks[k]
		res, err := l.claimChunk(ctx, ch.token, ch.items)
		for n, it := range ch.items {
			c := cs[it.i]
			switch {
			case err != nil:
				errs[it.i] = b.wrap(fmt.Sprintf("claim %s at %v", c.Job, c.Tick), err)
			case res.stale:
				errs[it.i] = fmt.Errorf("sql: claim %s at %v with token %d: %w", c.Job, c.Tick, c.Token, ledger.ErrStaleTerm)
			case !res.claimed[n]:
				errs[it.i] = fmt.Errorf("sql: claim %s at %v: %w", c.Job, c.Tick, ledger.ErrTickClaimed)
			}
		}
	})
	return errs
}

// claimChunk sends one round trip of claims of one token, sorted by job,
// of distinct jobs.
func (l *tickLedger) claimChunk(ctx context.Context, token uint64, items []claimItem) (claimChunk, error) {
	b := l.b
	done, err := l.slot(ctx)
	if err != nil {
		return claimChunk{}, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
	defer cancel()
	// A concurrent first claim of the same job (MySQL: duplicate key) or
	// a deadlock rolled the round trip back: the retry sees the other's
	// outcome.
	for attempt := 0; ; attempt++ {
		var res claimChunk
		var err error
		if b.drv.Dialect == Postgres {
			res, err = l.claimPG(ctx, int64(token), items)
		} else {
			res, err = l.claimMySQL(ctx, int64(token), items)
		}
		if attempt < 3 && err != nil && ctx.Err() == nil && b.drv.claimConflict(err) {
			b.log.Warn("ledger claim conflict, retrying", "claims", len(items), "attempt", attempt+1, "err", err)
			continue
		}
		return res, err
	}
}

// parallel calls f(0), ..., f(n-1), each on a goroutine of its own (the
// first on the caller's), and returns when all have returned. Each f
// queues for a round trip with slot.
func parallel(n int, f func(k int)) {
	var wg sync.WaitGroup
	for k := 1; k < n; k++ {
		wg.Go(func() { f(k) })
	}
	if n > 0 {
		f(0)
	}
	wg.Wait()
}

// slot waits for one of the Backend's ledgerParallel round trips, and
// returns the function that gives it back, or ctx's error.
func (l *tickLedger) slot(ctx context.Context) (func(), error) {
	select {
	case l.b.ledgerSlots <- struct{}{}:
		return func() { <-l.b.ledgerSlots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

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
				errs[it.i] = b.wrap(fmt.Sprintf("finish %s at %v", rs[it.i].Job, rs[it.i].Tick), err)
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
