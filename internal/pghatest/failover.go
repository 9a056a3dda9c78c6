package pghatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// KillPrimary crashes the primary (pg_ctl stop -m immediate). It stays
// the primary (stopped) until Promote.
func (p *Pair) KillPrimary(ctx context.Context) error {
	pri := p.Primary()
	if pri == nil {
		return errors.New("pghatest: kill: no primary")
	}
	return pri.Stop(ctx, Immediate)
}

// Promote makes the standby the primary (pg_ctl promote -w) and returns
// once it answers as one (pg_is_in_recovery() false). The old primary
// must be stopped (KillPrimary, or Stop): Promote refuses to make two
// primaries. The old primary becomes RoleDemoted. With Options.Sync,
// commits on the new primary wait until Rebuild has given it a standby.
func (p *Pair) Promote(ctx context.Context) error {
	sb := p.Standby()
	if sb == nil {
		return errors.New("pghatest: promote: no standby")
	}
	old := p.Primary()
	if old != nil {
		running, err := old.Running(ctx)
		if err != nil {
			return fmt.Errorf("pghatest: promote: %w", err)
		}
		if running {
			return fmt.Errorf("pghatest: promote: the primary %s is running (KillPrimary first)", old.Name)
		}
	}
	if err := p.run(ctx, "pg_ctl", "-D", sb.Dir, "-w", "-t", waitSeconds, "promote"); err != nil {
		return fmt.Errorf("pghatest: promote %s: %w", sb.Name, err)
	}
	err := p.waitFor(ctx, sb, "pg_is_in_recovery() to be false", func(ctx context.Context, c *pgx.Conn) (bool, error) {
		var rec bool
		err := c.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec)
		return err == nil && !rec, err
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	sb.role = RolePrimary
	if old != nil {
		old.role = RoleDemoted
	}
	p.mu.Unlock()
	return nil
}

// Rebuild makes the demoted server a standby of the primary: it stops it
// if it runs, removes its data directory, copies the primary with
// pg_basebackup -R -X stream (a fast checkpoint), gives it back its own
// port and settings, starts it, and returns once it streams with the
// expected sync_state. The pair is then a primary and a standby again,
// with the roles swapped, ready for the next KillPrimary.
//
// It takes 1-3 s on an idle 2-core machine (most of it the copy of the
// ~40 MB cluster and the server's start), a few seconds more on a loaded
// one; with Options.Sync, commits on the primary wait all that time. On
// an error the server stays demoted, and Rebuild can be called again.
func (p *Pair) Rebuild(ctx context.Context) error {
	pri := p.Primary()
	old := p.withRole(RoleDemoted)
	if pri == nil || old == nil {
		return errors.New("pghatest: rebuild: no demoted server (Promote first)")
	}
	running, err := old.Running(ctx)
	if err != nil {
		return fmt.Errorf("pghatest: rebuild: %w", err)
	}
	if running {
		if err := old.Stop(ctx, Immediate); err != nil {
			return fmt.Errorf("pghatest: rebuild: %w", err)
		}
	}
	if err := os.RemoveAll(old.Dir); err != nil {
		return fmt.Errorf("pghatest: rebuild: %w", err)
	}
	if err := p.baseBackup(ctx, pri, old); err != nil {
		return err
	}
	if err := old.writeConf(pri); err != nil {
		return err
	}
	if err := old.Start(ctx); err != nil {
		return fmt.Errorf("pghatest: rebuild: %w (port %d taken meanwhile?)", err, old.Port)
	}
	if err := p.waitStreaming(ctx, pri, old); err != nil {
		return err
	}
	p.setRole(old, RoleStandby)
	return nil
}

// Failover is KillPrimary, Promote and Rebuild: the roles swap, and the
// pair is back to a streaming primary and standby.
func (p *Pair) Failover(ctx context.Context) (FailoverTimes, error) {
	var ft FailoverTimes
	start := time.Now()
	if err := p.KillPrimary(ctx); err != nil {
		return ft, err
	}
	if err := p.Promote(ctx); err != nil {
		return ft, err
	}
	ft.Away = time.Since(start)
	start = time.Now()
	err := p.Rebuild(ctx)
	ft.Rebuild = time.Since(start)
	return ft, err
}

// WaitStreaming waits until the standby streams from the primary with
// sync_state 'sync' (Options.Sync) or 'async' (pg_stat_replication).
func (p *Pair) WaitStreaming(ctx context.Context) error {
	pri, sb := p.Primary(), p.Standby()
	if pri == nil || sb == nil {
		return errors.New("pghatest: wait for streaming: no primary and standby")
	}
	return p.waitStreaming(ctx, pri, sb)
}

func (p *Pair) waitStreaming(ctx context.Context, pri, sb *Server) error {
	want := "async"
	if p.opts.Sync {
		want = "sync"
	}
	return p.waitFor(ctx, pri, sb.Name+" to stream with sync_state "+want, func(ctx context.Context, c *pgx.Conn) (bool, error) {
		var state string
		err := c.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'`,
			sb.Name).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil && state == want, err
	})
}

// CaughtUp waits until the standby has replayed everything the primary
// had written when CaughtUp was called (pg_current_wal_lsn).
func (p *Pair) CaughtUp(ctx context.Context) error {
	pri, sb := p.Primary(), p.Standby()
	if pri == nil || sb == nil {
		return errors.New("pghatest: caught up: no primary and standby")
	}
	var lsn string
	if err := p.queryRow(ctx, pri, `SELECT pg_current_wal_lsn()::text`, &lsn); err != nil {
		return fmt.Errorf("pghatest: caught up: %s: %w", pri.Name, err)
	}
	return p.waitFor(ctx, sb, "replay of "+lsn, func(ctx context.Context, c *pgx.Conn) (bool, error) {
		var ok bool
		err := c.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, lsn).Scan(&ok)
		return err == nil && ok, err
	})
}

// waitFor polls cond on a connection to s's database postgres (made
// again after an error) every 20 ms until it returns true, ctx ends or
// WaitLimit passes.
func (p *Pair) waitFor(ctx context.Context, s *Server, what string, cond func(context.Context, *pgx.Conn) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, WaitLimit)
	defer cancel()
	var c *pgx.Conn
	defer func() {
		if c != nil {
			c.Close(context.Background())
		}
	}()
	var last error
	for {
		if c == nil {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			c, last = pgx.Connect(cctx, s.DSN("postgres"))
			ccancel()
		}
		if last == nil {
			qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
			ok, err := cond(qctx, c)
			qcancel()
			if ok {
				return nil
			}
			if last = err; err != nil {
				c.Close(context.Background())
				c = nil
			}
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("pghatest: %s: waiting for %s: %v", s.Name, what, ctx.Err())
			if last != nil {
				msg += " (last error: " + last.Error() + ")"
			}
			return errors.New(msg)
		case <-time.After(pollEvery):
		}
	}
}

// queryRow runs q on a connection of its own to s's database postgres.
func (p *Pair) queryRow(ctx context.Context, s *Server, q string, dest ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.QueryRow(ctx, q).Scan(dest...)
}
