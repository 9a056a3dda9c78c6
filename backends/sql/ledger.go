package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/batonhq/baton/ledger"
)

// Ledger returns the ledger.Ledger of b's election, kept in the
// tables Table_ticks and Table_runs of the same database (see the schema
// files). It is safe for concurrent use; every method blocks for one
// statement or transaction, bounded by ctx and Config.QueryTimeout.
//
// Ticks are stored as unix nanoseconds, so a tick round-trips exactly
// (times between the years 1678 and 2262); the instant is kept, the
// location is not (ticks come back in UTC). Started and Ended are stored
// with microsecond precision.
func (b *Backend) Ledger() ledger.Ledger { return &tickLedger{b: b} }

type tickLedger struct{ b *Backend }

var _ ledger.Ledger = (*tickLedger)(nil)

// maxErrorLen bounds the error text stored with a run, in bytes.
const maxErrorLen = 8 << 10

// tickNanos converts a tick to unix nanoseconds, refusing times that do
// not fit.
func tickNanos(job string, tick time.Time) (int64, error) {
	n := tick.UnixNano()
	if tick.IsZero() || !time.Unix(0, n).Equal(tick) {
		return 0, fmt.Errorf("sql: job %q: %w: tick %v outside the years 1678-2262", job, ErrInvalidName, tick)
	}
	return n, nil
}

func checkJob(job string) error {
	if job == "" || len([]rune(job)) > MaxNameLen {
		return fmt.Errorf("sql: %w: job %q: want 1 to %d characters", ErrInvalidName, job, MaxNameLen)
	}
	return nil
}

// Claim implements ledger.Ledger. On PostgreSQL it is one
// statement; on MySQL one READ COMMITTED transaction. Either way the lease
// row is share-locked first and must hold c.Token and be live by the
// database clock; a takeover waits for the claim to commit, and a claim
// waits for a takeover in progress, then fails. A stale claim returns an
// error wrapping ledger.ErrStaleTerm; the Host then ends its term
// (the database knows before the renew loop does).
func (l *tickLedger) Claim(ctx context.Context, c ledger.Claim) error {
	b := l.b
	if err := checkJob(c.Job); err != nil {
		return err
	}
	tick, err := tickNanos(c.Job, c.Tick)
	if err != nil {
		return err
	}
	if c.Token == 0 || c.Token > math.MaxInt64 {
		return fmt.Errorf("sql: claim %s at %v: %w: token %d", c.Job, c.Tick, ErrInvalidName, c.Token)
	}
	started := c.Started
	if started.IsZero() {
		started = b.cfg.wallNow() // informational only
	}
	started = started.UTC().Truncate(time.Microsecond)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
	defer cancel()

	var stale, claimed bool
	switch b.drv.Dialect {
	case Postgres:
		var leaseN, claimN, runN int64
		err = b.cfg.DB.QueryRowContext(ctx, b.q.claimPG, b.cfg.Election, int64(c.Token), c.Job, tick,
			c.Instance, c.CatchUp, started).Scan(&leaseN, &claimN, &runN)
		stale, claimed = leaseN == 0, claimN == 1
	case MySQL:
		// A concurrent first claim of the same job (duplicate key) or a
		// deadlock is retried: the retry sees the other's outcome.
		for attempt := 0; ; attempt++ {
			stale, claimed, err = l.claimMySQL(ctx, c, tick, started)
			if attempt < 3 && err != nil && b.drv.claimConflict(err) {
				continue
			}
			break
		}
	}
	if err != nil {
		return b.wrap(fmt.Sprintf("claim %s at %v", c.Job, c.Tick), err)
	}
	if stale {
		return fmt.Errorf("sql: claim %s at %v with token %d: %w", c.Job, c.Tick, c.Token, ledger.ErrStaleTerm)
	}
	if !claimed {
		return fmt.Errorf("sql: claim %s at %v: %w", c.Job, c.Tick, ledger.ErrTickClaimed)
	}
	l.trim(ctx, c.Job)
	return nil
}

// claimMySQL runs one claim transaction.
func (l *tickLedger) claimMySQL(ctx context.Context, c ledger.Claim, tick int64, started time.Time) (stale, claimed bool, err error) {
	b := l.b
	// READ COMMITTED: no gap locks, so claims of different new jobs do not
	// deadlock on the index gap between them.
	tx, err := b.cfg.DB.BeginTx(ctx, &dbsql.TxOptions{Isolation: dbsql.LevelReadCommitted})
	if err != nil {
		return false, false, err
	}
	defer tx.Rollback()
	var live bool
	err = tx.QueryRowContext(ctx, b.q.leaseShare, int64(c.Token), b.cfg.Election).Scan(&live)
	if errors.Is(err, dbsql.ErrNoRows) || (err == nil && !live) {
		return true, false, nil
	}
	if err != nil {
		return false, false, err
	}
	var last int64
	err = tx.QueryRowContext(ctx, b.q.tickForUpd, b.cfg.Election, c.Job).Scan(&last)
	switch {
	case errors.Is(err, dbsql.ErrNoRows):
		_, err = tx.ExecContext(ctx, b.q.tickInsert, b.cfg.Election, c.Job, tick, int64(c.Token))
	case err != nil:
	case last >= tick:
		return false, false, nil
	default:
		_, err = tx.ExecContext(ctx, b.q.tickUpdate, tick, int64(c.Token), b.cfg.Election, c.Job)
	}
	if err != nil {
		return false, false, err
	}
	st := mysqlTime(started)
	if _, err := tx.ExecContext(ctx, b.q.runInsert, b.cfg.Election, c.Job, tick, c.Instance, int64(c.Token), c.CatchUp, st,
		c.Instance, int64(c.Token), c.CatchUp, st); err != nil {
		return false, false, err
	}
	return false, true, tx.Commit()
}

// mysqlTime formats t as a UTC DATETIME(6) literal, independent of the
// connection's loc and time_zone settings.
func mysqlTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.000000")
}

// trim deletes the runs of job beyond the newest History. It is best
// effort: a failure is logged and retried by the next claim.
func (l *tickLedger) trim(ctx context.Context, job string) {
	b := l.b
	var err error
	if b.drv.Dialect == Postgres {
		_, err = b.cfg.DB.ExecContext(ctx, b.q.trimHistory, b.cfg.Election, job, b.cfg.History-1)
	} else {
		_, err = b.cfg.DB.ExecContext(ctx, b.q.trimHistory, b.cfg.Election, job, b.cfg.Election, job, b.cfg.History-1)
	}
	if err != nil {
		b.log.Warn("trimming run history failed", "job", job, "err", err)
	}
}

// LastClaimed implements ledger.Ledger.
func (l *tickLedger) LastClaimed(ctx context.Context, job string) (time.Time, error) {
	b := l.b
	ctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
	defer cancel()
	var n int64
	err := b.cfg.DB.QueryRowContext(ctx, b.q.lastClaimed, b.cfg.Election, job).Scan(&n)
	if errors.Is(err, dbsql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, b.wrap("last claimed tick of "+job, err)
	}
	return time.Unix(0, n).UTC(), nil
}

// Finish implements ledger.Ledger: it sets Ended (NULL if zero),
// Result and Error of the run with r's Job, Tick and Token; the other
// fields keep their claimed values. A run no longer in the history
// (trimmed, or never claimed) is left alone and is not an error.
func (l *tickLedger) Finish(ctx context.Context, r ledger.Run) error {
	b := l.b
	tick, err := tickNanos(r.Job, r.Tick)
	if err != nil {
		return err
	}
	if r.Token > math.MaxInt64 {
		return fmt.Errorf("sql: finish %s at %v: %w: token %d", r.Job, r.Tick, ErrInvalidName, r.Token)
	}
	msg := r.Error
	if len(msg) > maxErrorLen {
		msg = truncateUTF8(msg, maxErrorLen)
	}
	var ended any
	if !r.Ended.IsZero() {
		if b.drv.Dialect == MySQL {
			ended = mysqlTime(r.Ended)
		} else {
			ended = r.Ended.UTC().Truncate(time.Microsecond)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
	defer cancel()
	if _, err := b.cfg.DB.ExecContext(ctx, b.q.finish, ended, string(r.Result), msg, b.cfg.Election, r.Job, tick, int64(r.Token)); err != nil {
		return b.wrap(fmt.Sprintf("finish %s at %v", r.Job, r.Tick), err)
	}
	return nil
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
		if err := rows.Scan(&tick, &r.Instance, &token, &r.CatchUp, &started, &ended, &result, &errMsg); err != nil {
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
