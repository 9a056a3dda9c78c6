package sql

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/ledger"
)

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
				errs[it.i] = refused(b.wrap(fmt.Sprintf("claim %s at %v", c.Job, c.Tick), err))
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

// refused marks err as ledger.ErrRefused when the server refused the
// caller a privilege: PostgreSQL's insufficient_privilege (42501), or
// MySQL's and MariaDB's access denials (1044, 1045, 1142, 1143, 1227,
// 1370). The transaction was rolled back: nothing was recorded.
func refused(err error) error {
	var st interface{ SQLState() string }
	if errors.As(err, &st) && st.SQLState() == "42501" {
		return ledger.Refused(err)
	}
	if mysqlDenied.MatchString(err.Error()) {
		return ledger.Refused(err)
	}
	return err
}

// mysqlDenied matches the text of go-sql-driver's MySQLError for an
// access denial ("Error 1142 (42000): ... command denied to user ...").
var mysqlDenied = regexp.MustCompile(`\bError (1044|1045|1142|1143|1227|1370)\b`)
