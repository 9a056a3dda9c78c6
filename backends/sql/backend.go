package sql

import (
	"context"
	"crypto/sha256"
	dbsql "database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

// Backend is an election.Backend keeping one election in one row of a SQL
// table; postgres.New and mysql.New return one. It also implements
// driver.LeaderReader, and its Ledger method gives the election's
// ledger.Ledger. Its methods are safe for
// concurrent use; a process normally runs one candidate per election.
//
// A Backend starts no goroutine of its own: a waiting Acquire runs (and
// stops) its listener, a lease runs (and stops) its renew loop.
type Backend struct {
	cfg     Config
	drv     Driver
	q       queries
	log     *slog.Logger
	channel string // PostgreSQL notification channel of this election

	ledgerSlots chan struct{} // the ledger's round trips in flight, at most ledgerParallel
	jsonTable   feature       // MySQL: whether the server has JSON_TABLE, once known
	idleTimeout feature       // MySQL: whether the server has idle_transaction_timeout (MariaDB), once known

	// claimStep, if set (by tests only: export_test.go), is called in a
	// MySQL claim transaction after each statement that another one or
	// the commit follows, with its number (claimMySQL's list), on the
	// claim's goroutine: a test cuts the network there.
	claimStep func(done int)
	// controlStep, a test hook: called by a fenced control put with its
	// transaction open, once the lease row is share-locked.
	controlStep func()
}

var (
	_ election.Backend    = (*Backend)(nil)
	_ driver.LeaderReader = (*Backend)(nil)
)

// New copies cfg, applies defaults, validates it with drv and returns a
// Backend speaking drv's dialect. It does not touch the database: call
// Check (or EnsureSchema) to fail fast on a missing schema. Applications
// normally call postgres.New or mysql.New, which supply drv; New is for a
// program that picks the dialect at run time from one Config.
func New(cfg Config, drv Driver) (*Backend, error) {
	errs := cfg.problems()
	if err := drv.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := driver.InvalidConfig("sql", errs); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	sum := sha256.Sum256([]byte(cfg.Table + "\x00" + cfg.Election))
	return &Backend{
		cfg:     cfg,
		drv:     drv,
		q:       buildQueries(drv.Dialect, cfg.Table, cfg.Timing.TTL.Microseconds()),
		log:     cfg.Logger.With("election", cfg.Election),
		channel: "baton_" + hex.EncodeToString(sum[:12]),

		ledgerSlots: make(chan struct{}, ledgerParallel),
	}, nil
}

// Timing returns the lease timing in effect (defaults applied).
func (b *Backend) Timing() election.Timing { return b.cfg.Timing }

// Acquire implements election.Backend. It blocks until id leads the
// election or ctx is done.
//
// While another candidate holds a live lease, Acquire only reads the row
// (one SELECT per PollInterval, or sooner when the row's expiry by the
// database clock is nearer, or at once on a NOTIFY from the holder's
// Release on PostgreSQL with postgres.Config.Listen); it writes only when
// the row is free or expired. Errors the database answers that retrying cannot fix
// (a missing table: ErrSchemaMissing; a permission or syntax error) are
// returned; network and transient errors are logged and retried.
//
// id.ID is required. If id.Started is zero it is set to the current time;
// the identity is stored as JSON in the holder column.
func (b *Backend) Acquire(ctx context.Context, id election.Identity) (election.Lease, error) {
	if id.ID == "" {
		return nil, fmt.Errorf("sql: acquire: %w: Identity.ID is empty", ErrInvalidName)
	}
	if id.Started.IsZero() {
		id.Started = b.cfg.wallNow() // informational only
	}
	holder, err := json.Marshal(id)
	if err != nil {
		return nil, fmt.Errorf("sql: acquire: %w: identity: %v", ErrInvalidName, err)
	}
	log := b.log.With("identity", id.ID)

	var lis *listener
	defer lis.stop()
	for {
		wait := b.cfg.PollInterval
		// A query waits for its QueryTimeout on a network that drops
		// it: say so each StallBound meanwhile.
		stall := driver.WatchAttempt(ctx, driver.StallBound(b.cfg.Timing), "sql: acquire "+b.cfg.Election, nil)
		free, remaining, err := b.peek(ctx)
		if err == nil && free {
			var l *driver.ManagedLease
			l, err = b.tryAcquire(ctx, holder, log)
			if l != nil {
				stall()
				return l, nil
			}
		}
		stall()
		if err == nil {
			driver.ReportAttempt(ctx, nil)
			if !free && remaining < wait {
				// Wake just after the row expires by the database clock.
				// The acquire statement decides again with the database
				// clock.
				wait = max(remaining, 0) + time.Millisecond
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("sql: acquire: %w", ctx.Err())
			}
			if b.permanent(err) {
				return nil, err
			}
			// The Elector logs it (at Warn, at a bounded rate) and counts it.
			driver.ReportAttempt(ctx, fmt.Errorf("sql: acquire %s: %w", b.cfg.Election, err))
		}
		if lis == nil && b.drv.Listen != nil {
			lis = b.startListener(ctx)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("sql: acquire: %w", ctx.Err())
		case <-t.C:
		case <-lis.notified():
			t.Stop()
		}
	}
}

// peek reads whether the row is free (missing or expired by the database
// clock) and, if not, how long until it expires.
func (b *Backend) peek(ctx context.Context) (free bool, remaining time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
	defer cancel()
	var micros int64
	err = b.cfg.DB.QueryRowContext(ctx, b.q.peek, b.cfg.Election).Scan(&free, &micros)
	if errors.Is(err, dbsql.ErrNoRows) {
		return true, 0, nil
	}
	if err != nil {
		return false, 0, b.wrap("read lease row", err)
	}
	return free, time.Duration(micros) * time.Microsecond, nil
}

// tryAcquire runs the acquire statement once. It returns a lease, or nil
// and no error if another candidate holds the row.
func (b *Backend) tryAcquire(ctx context.Context, holder []byte, log *slog.Logger) (*driver.ManagedLease, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
	defer cancel()
	var (
		token    int64
		acquired int64
		sent     time.Time
	)
	switch b.drv.Dialect {
	case Postgres:
		// sent is read before the statement goes out (and carries the
		// monotonic clock): the row's expiry is set later than sent+TTL.
		sent = time.Now()
		err := b.cfg.DB.QueryRowContext(ctx, b.q.acquire, b.cfg.Election, string(holder)).Scan(&token, &acquired)
		if errors.Is(err, dbsql.ErrNoRows) {
			return nil, nil // live row: the conflict's WHERE was false
		}
		if err != nil {
			return nil, b.wrap("acquire", err)
		}
	case MySQL:
		res, err := b.cfg.DB.ExecContext(ctx, b.q.bump)
		if err != nil {
			return nil, b.wrap("next token", err)
		}
		next, err := res.LastInsertId()
		if err != nil || next <= 0 {
			return nil, fmt.Errorf("sql: next token: LAST_INSERT_ID() = %d: %v", next, err)
		}
		sent = time.Now()
		res, err = b.cfg.DB.ExecContext(ctx, b.q.upsert, b.cfg.Election, string(holder), next, string(holder), next)
		if err != nil {
			return nil, b.wrap("acquire", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, b.wrap("acquire", err)
		}
		// 1: inserted; 2: taken over; 0: live row left alone (1 with
		// clientFoundRows=true, told apart by the token read back).
		if n == 0 {
			return nil, nil
		}
		st, err := b.state(ctx)
		if err != nil {
			return nil, err
		}
		if st.holder != string(holder) || (n == 1 && st.token != next) || (n != 1 && n != 2) {
			return nil, nil
		}
		token, acquired = st.token, st.acquired
	}
	l := b.newLease(uint64(token), sent)
	log.Debug("row acquired", "token", token,
		"acquired_at", time.UnixMicro(acquired).UTC(), "deadline_in", time.Until(l.Deadline()).Round(time.Millisecond).String())
	return l, nil
}

// newLease starts the lease of the term with token, whose acquire was sent
// at sent.
func (b *Backend) newLease(token uint64, sent time.Time) *driver.ManagedLease {
	l := driver.NewManagedLease(driver.ManagedLeaseConfig{
		Timing: b.cfg.Timing,
		Sent:   sent,
		Renew: func(ctx context.Context) (time.Duration, error) {
			return 0, b.renew(ctx, token)
		},
		Release: func(ctx context.Context) error {
			return b.release(ctx, token)
		},
		Logger: b.log.With("token", token),
	})
	l.SetToken(token)
	return l
}

// renew extends the row of the term with token by one TTL from now by the
// database clock. Zero rows means the term is over on the database.
func (b *Backend) renew(ctx context.Context, token uint64) error {
	res, err := b.cfg.DB.ExecContext(ctx, b.q.renew, b.cfg.Election, int64(token))
	if err != nil {
		return b.wrap("renew", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return b.wrap("renew", err)
	}
	if n == 0 {
		return election.LostError(b.lossReason(ctx, token))
	}
	return nil
}

// lossReason says, as well as one more read can, why the row no longer
// holds token.
func (b *Backend) lossReason(ctx context.Context, token uint64) error {
	st, err := b.state(ctx)
	switch {
	case errors.Is(err, election.ErrNoLeader) && st.token == 0:
		return fmt.Errorf("sql: lease row of election %q deleted from %s", b.cfg.Election, b.cfg.Table)
	case err != nil && !errors.Is(err, election.ErrNoLeader):
		return fmt.Errorf("sql: no live lease row with token %d", token)
	case st.token != int64(token):
		return fmt.Errorf("sql: lease row holds token %d, not %d: taken over or edited", st.token, token)
	default:
		return fmt.Errorf("sql: lease with token %d expired by the database clock", token)
	}
}

// release frees the row if it still holds token; on PostgreSQL it also
// notifies the waiting candidates.
func (b *Backend) release(ctx context.Context, token uint64) error {
	args := []any{b.cfg.Election, int64(token)}
	if b.drv.Dialect == Postgres {
		args = append(args, b.channel)
	}
	if _, err := b.cfg.DB.ExecContext(ctx, b.q.release, args...); err != nil {
		return b.wrap("release", err)
	}
	b.log.Debug("row released", "token", token)
	return nil
}

// rowState is the lease row as read by state.
type rowState struct {
	holder   string
	token    int64
	acquired int64 // unix microseconds
	live     bool
}

// state reads the lease row. It returns ErrNoLeader (with the row, if
// any) when the row is missing or expired by the database clock.
func (b *Backend) state(ctx context.Context) (rowState, error) {
	var st rowState
	err := b.cfg.DB.QueryRowContext(ctx, b.q.state, b.cfg.Election).Scan(&st.holder, &st.token, &st.acquired, &st.live)
	if errors.Is(err, dbsql.ErrNoRows) {
		return rowState{}, election.ErrNoLeader
	}
	if err != nil {
		return rowState{}, b.wrap("read lease row", err)
	}
	if !st.live {
		return st, election.ErrNoLeader
	}
	return st, nil
}

// Leader implements driver.LeaderReader: it reads the row and returns
// the holder if its lease is live by the database clock, else an error
// wrapping election.ErrNoLeader. It blocks for one statement, bounded by
// ctx and QueryTimeout.
func (b *Backend) Leader(ctx context.Context) (election.LeaderInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.QueryTimeout)
	defer cancel()
	st, err := b.state(ctx)
	if err != nil {
		return election.LeaderInfo{}, err
	}
	var id election.Identity
	if json.Unmarshal([]byte(st.holder), &id) != nil || id.ID == "" {
		id = election.Identity{ID: st.holder} // written by someone else: show it as is
	}
	return election.LeaderInfo{Identity: id, Token: uint64(st.token), Since: time.UnixMicro(st.acquired).UTC()}, nil
}
