package e2e

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/dbtest"
	"github.com/batonhq/baton/internal/pghatest"
)

// Faults of the PostgreSQL pair.
const (
	// fPGFailover: the primary killed (pg_ctl stop -m immediate), the
	// standby promoted, then the old primary rebuilt as the new standby.
	fPGFailover = "pg-failover"
)

// newPostgresHA is the PostgreSQL backend as production runs it: a
// primary and a streaming standby made with pg_basebackup, on ports and
// data directories of the run's own, with the synchronous settings the
// docs/backends/postgres.md documents (synchronous_standby_names = '*',
// synchronous_commit = remote_apply). Every node lists both servers in its DSN, each through
// a proxy of its own, with target_session_attrs=read-write, so that it
// follows the primary across a failover.
func newPostgresHA(ctx context.Context, dir string) (*backend, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pair, err := pghatest.Start(sctx, filepath.Join(dir, "pg"), pghatest.Options{Sync: true})
	if err != nil {
		return nil, err
	}
	srv := pair.Servers()
	table := dbtest.NewName("baton_e2e_")
	ttl, poll := 3*time.Second, 250*time.Millisecond
	be := &backend{
		name: "postgres-ha", topology: "PostgreSQL primary and pg_basebackup streaming standby (synchronous, remote_apply); each node lists both through a proxy each, target_session_attrs=read-write",
		targets: func(int) []string { return []string{srv[0].Addr(), srv[1].Addr()} },
		nodes:   4, ttl: ttl, poll: poll, grace: 30 * time.Second,
		crashBound: ttl + poll + sqlReaction, handoverBound: time.Second + poll + reconnectAllowance,
		args: func(addrs []string) []string {
			u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: strings.Join(addrs, ","), Path: "/" + pghatest.DefaultDatabase}
			q := url.Values{}
			q.Set("sslmode", "disable")
			q.Set("target_session_attrs", "read-write")
			q.Set("connect_timeout", "3")
			u.RawQuery = q.Encode()
			return []string{"--backend", "postgres", "--dsn", u.String(), "--table", table}
		},
		// The restart ends when the standby streams synchronously again:
		// until then no commit returns (remote_apply), and the standby
		// tries to reconnect only every wal_retrieve_retry_interval (5 s).
		// A soak's kill 221 ms after the primary accepted connections
		// again took 4.37 s to fail over against 3.75 s: the next leader's
		// acquire committed 2.3 s late, when the standby was back.
		restart: func(ctx context.Context) error {
			p := pair.Primary()
			if err := p.Stop(ctx, pghatest.Fast); err != nil {
				return err
			}
			if err := p.Start(ctx); err != nil {
				return err
			}
			return pair.WaitStreaming(ctx)
		},
		restartKind: "the primary stopped (pg_ctl stop -m fast) and started again, until the standby streams synchronously again",
		close:       func() { _ = pair.Close() },
	}
	be.faults = []backendFault{{fPGFailover, func(ctx context.Context, sc *scenario, kind string) error {
		old := pair.Primary()
		if err := pair.KillPrimary(ctx); err != nil {
			return err
		}
		killed := time.Now()
		sc.note(kind, old.Name, "primary %s killed (immediate stop)", old.Name)
		sc.pause(0, time.Second)
		if err := pair.Promote(ctx); err != nil {
			return err
		}
		sc.note("info-promoted", pair.Primary().Name, "standby promoted %v after the kill", time.Since(killed).Round(time.Millisecond))
		if err := pair.Rebuild(ctx); err != nil {
			return err
		}
		sc.note(kind+"-end", old.Name, "%s rebuilt as the standby of %s (pg_basebackup), streaming synchronously; %v after the kill",
			old.Name, pair.Primary().Name, time.Since(killed).Round(time.Millisecond))
		return nil
	}}}
	return be, nil
}
