package sql_test

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/proxytest"
	"github.com/batonhq/baton/ledger"
)

// acquire, release and open are backendtest's helpers, acquire with
// this package's bound; ledger_test.go uses them too.
func acquire(t *testing.T, b election.Backend, id string) election.Lease {
	t.Helper()
	return backendtest.Acquire(t, b, id, 10*testTTL)
}

var (
	release = backendtest.Release
	open    = backendtest.IsOpen
)

func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

// skewed is an application wall clock off by d, without a monotonic
// reading: what time.Now returns on a host whose clock is wrong.
func skewed(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Round(0).Add(d) }
}

// TestClockSkew_AppClockDoesNotMatter: candidates whose wall clocks are
// minutes apart, and whose database sessions use different time zones,
// neither steal a live lease nor keep an expired one. The application wall
// clock reaches only informational fields (Identity.Started here); the
// database session time zone reaches nothing (UTC_TIMESTAMP, timestamptz).
// A skewed leader's term ends by its monotonic deadline.
//
// It runs at TTL 5 s (renewal budget 2.3 s, safety margin 1 s), not the
// package's 2 s: under ci-loaded a 2 s leader missed its 833 ms renewal
// budget, lost its lease on the database, and the candidate then took a
// lease that was no longer live.
func TestClockSkew_AppClockDoesNotMatter(t *testing.T) {
	timing := election.Timing{TTL: 5 * time.Second}
	ttl := timing.TTL
	margin := timing.WithDefaults(ttl).SafetyMargin
	forEachServer(t, func(t *testing.T, s *server) {
		tz := map[bool]string{true: "Asia/Kathmandu", false: "America/Los_Angeles"}
		if s.dialect == sql.MySQL {
			tz = map[bool]string{true: "+05:45", false: "-08:00"}
		}
		for _, skew := range []time.Duration{-10 * time.Minute, 10 * time.Minute} {
			t.Run(fmt.Sprintf("leader%+v", skew), func(t *testing.T) {
				table := s.newTable(t)
				ld := s.candidate(t, table, "skew", candOpts{tz: tz[skew < 0], wall: skewed(skew), timing: &timing})
				cd := s.candidate(t, table, "skew", candOpts{tz: tz[skew > 0], wall: skewed(-skew), timing: &timing})

				// The session time zones are in effect.
				for _, c := range []struct {
					db *dbsql.DB
					tz string
				}{{ld.db, tz[skew < 0]}, {cd.db, tz[skew > 0]}} {
					q := map[sql.Dialect]string{sql.Postgres: "SHOW timezone", sql.MySQL: "SELECT @@session.time_zone"}[s.dialect]
					var got string
					if err := c.db.QueryRow(q).Scan(&got); err != nil || got != c.tz {
						t.Fatalf("session time zone %q, %v; want %q", got, err, c.tz)
					}
				}
				la := acquire(t, ld, "leader")
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				info, err := cd.Leader(ctx)
				cancel()
				if err != nil || info.Identity.ID != "leader" || info.Token != la.Token() {
					t.Fatalf("Leader() = %+v, %v; want leader with token %d", info, err, la.Token())
				}
				if off := time.Until(info.Identity.Started); off < skew-time.Minute || off > skew+time.Minute {
					t.Fatalf("stored Identity.Started is %v from now, want about %v (the skewed clock)", off, skew)
				}

				// The candidate, 2*skew away, cannot take the live lease.
				ctx, cancel = context.WithTimeout(context.Background(), ttl+ttl/2)
				l, err := cd.Acquire(ctx, election.Identity{ID: "candidate"})
				cancel()
				if err == nil {
					release(t, l)
					if !open(la) {
						t.Fatalf("the leader's term ended (%v) and the candidate took the lease: the leader could not renew", la.Err())
					}
					t.Fatal("candidate with a skewed clock acquired a live lease")
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("candidate Acquire: %v, want a deadline error", err)
				}
				if !open(la) {
					t.Fatalf("leader's term ended while renewing: %v", la.Err())
				}

				// Cut the leader off for good: its term ends by its
				// monotonic deadline, before the candidate leads.
				deadline := la.(driver.Deadliner).Deadline()
				ld.proxy.Blackhole()
				cut := time.Now()
				ctx, cancel = context.WithTimeout(context.Background(), 5*ttl)
				defer cancel()
				ch := backendtest.AcquireAsync(ctx, cd, "candidate")
				var ended time.Time
				select {
				case <-la.Done():
					ended = time.Now()
				case r := <-ch:
					t.Fatalf("candidate acquired (%v) before the leader's term ended", r.Err)
				case <-time.After(ttl + time.Second):
					t.Fatal("skewed leader's term did not end within TTL + 1s of the cut")
				}
				// The deadline is on the monotonic clock; a loaded machine
				// may deliver its timer late, never by half the margin
				// that keeps it ahead of the database's expiry.
				if late := ended.Sub(deadline); late > margin/2 {
					t.Errorf("term ended %v after its local deadline (limit %v)", late, margin/2)
				}
				r := <-ch
				if r.Err != nil {
					t.Fatalf("candidate: %v", r.Err)
				}
				defer release(t, r.Lease)
				t.Logf("skew %v/%v, session tz %s/%s: leader's term ended %v after the cut (its monotonic deadline %+v), candidate led %v later",
					skew, -skew, tz[skew < 0], tz[skew > 0], ms(ended.Sub(cut)), ms(deadline.Sub(cut)), ms(r.At.Sub(ended)))
				if !r.At.After(ended) || r.Lease.Token() <= la.Token() {
					t.Errorf("candidate led at %v (leader ended %v), token %d after %d", r.At, ended, r.Lease.Token(), la.Token())
				}
				ld.proxy.Heal()
				release(t, la) // a no-op on the database: the token moved on
			})
		}
	})
}

// TestAcquire_MissingTable: without the schema, Acquire fails at once with
// an error naming the table and the file to apply, and Check lists every
// missing relation.
func TestAcquire_MissingTable(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table := randomTable()
		b := s.backend(t, s.admin, table, "missing", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		_, err := b.Acquire(ctx, election.Identity{ID: "x"})
		took := time.Since(start)
		file := map[sql.Dialect]string{sql.Postgres: "schema/postgres.sql", sql.MySQL: "schema/mysql.sql"}[s.dialect]
		if !errors.Is(err, sql.ErrSchemaMissing) || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), file) ||
			!strings.Contains(err.Error(), "EnsureSchema") {
			t.Fatalf("Acquire on a missing table: %v\nwant ErrSchemaMissing naming %s and %s", err, table, file)
		}
		if took > time.Second {
			t.Errorf("Acquire took %v to report the missing table", took)
		}
		t.Logf("Acquire error after %v: %v", ms(took), err)
		if _, err := b.Leader(ctx); !errors.Is(err, sql.ErrSchemaMissing) {
			t.Errorf("Leader on a missing table: %v", err)
		}
		err = b.Check(ctx)
		for _, rel := range []string{table, table + "_ticks", table + "_runs"} {
			if err == nil || !strings.Contains(err.Error(), rel) {
				t.Errorf("Check() = %v, want it to name %s", err, rel)
			}
		}
		// EnsureSchema fixes it; running it twice is fine.
		t.Cleanup(func() { s.dropTable(t, table) })
		for range 2 {
			if err := b.EnsureSchema(ctx); err != nil {
				t.Fatalf("EnsureSchema: %v", err)
			}
		}
		l := acquire(t, b, "x")
		release(t, l)
		// Only the token counter missing (PostgreSQL: the sequence).
		if s.dialect == sql.Postgres {
			if _, err := s.admin.ExecContext(ctx, "DROP SEQUENCE "+table+"_token_seq"); err != nil {
				t.Fatal(err)
			}
			_, err := b.Acquire(ctx, election.Identity{ID: "x"})
			if !errors.Is(err, sql.ErrSchemaMissing) || !strings.Contains(err.Error(), table+"_token_seq") {
				t.Fatalf("Acquire without the sequence: %v", err)
			}
		}
	})
}

// TestRenew_RowDeletedByHand: the term ends at the next renewal, and the
// next term's token is still greater.
func TestRenew_RowDeletedByHand(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table, _, la := s.leader(t, "deleted")
		edited := handEdit(t, s, "DELETE FROM "+table+" WHERE election = 'deleted'")
		waitEnded(t, la, edited, "deleted")
		lb := acquire(t, s.candidate(t, table, "deleted", candOpts{}), "b")
		defer release(t, lb)
		if lb.Token() <= la.Token() {
			t.Errorf("token after the row was deleted: %d <= %d", lb.Token(), la.Token())
		}
	})
}

// TestRenew_RowEditedByHand: a changed token ends the term at the next
// renewal.
func TestRenew_RowEditedByHand(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table, _, la := s.leader(t, "edited")
		edited := handEdit(t, s, "UPDATE "+table+" SET token = token + 100 WHERE election = 'edited'")
		waitEnded(t, la, edited, "taken over or edited")
	})
}

func handEdit(t *testing.T, s *server, q string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := s.admin.ExecContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s: %d rows", q, n)
	}
	return time.Now()
}

// waitEnded waits for l to end after a hand edit: within one
// RenewInterval (plus slack), not at the local deadline.
func waitEnded(t *testing.T, l election.Lease, edited time.Time, reason string) {
	t.Helper()
	renew := election.Timing{TTL: testTTL}.WithDefaults(testTTL).RenewInterval
	select {
	case <-l.Done():
	case <-time.After(testTTL):
		t.Fatal("term did not end after the hand edit")
	}
	took := time.Since(edited)
	t.Logf("term ended %v after the hand edit: %v", ms(took), l.Err())
	if !errors.Is(l.Err(), election.ErrLeadershipLost) || !strings.Contains(l.Err().Error(), reason) {
		t.Errorf("Err() = %v, want ErrLeadershipLost saying %q", l.Err(), reason)
	}
	if took > renew+300*time.Millisecond {
		t.Errorf("term ended %v after the edit, want within a RenewInterval (%v)", took, renew)
	}
}

// TestFollower_IdleWritesNothing: a waiting candidate takes no token and
// changes no row while the leader renews.
func TestFollower_IdleWritesNothing(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table, _, _ := s.leader(t, "idle")
		counter := "SELECT last_value FROM " + table + "_token_seq"
		if s.dialect == sql.MySQL {
			counter = "SELECT token FROM " + table + "_seq"
		}
		read := func() (v int64) {
			if err := s.admin.QueryRow(counter).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		before := read()
		b := s.candidate(t, table, "idle", candOpts{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*s.poll+testTTL)
		defer cancel()
		if l, err := b.Acquire(ctx, election.Identity{ID: "b"}); err == nil {
			release(t, l)
			t.Fatal("b acquired a live lease")
		}
		if after := read(); after != before {
			t.Errorf("token counter moved from %d to %d while b only waited", before, after)
		}
		t.Logf("idle follower: %d connections, %d bytes through its proxy in %v", b.proxy.Connections(), b.proxy.Bytes(), 3*s.poll+testTTL)
	})
}

// TestListen_BrokenFallsBackToPolling: a listen connection that cannot
// connect, or is blackholed, leaves polling working (PostgreSQL).
func TestListen_BrokenFallsBackToPolling(t *testing.T) {
	t.Parallel()
	s := getServer(t, "postgres")
	table := s.newTable(t)
	dead, err := proxytest.New(s.target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	dead.Blackhole()
	for name, listen := range map[string]func(context.Context) (*pgx.Conn, error){
		"refused":    func(context.Context) (*pgx.Conn, error) { return nil, errors.New("no listening today") },
		"blackholed": s.listen(dead.Addr(), ""),
	} {
		t.Run(name, func(t *testing.T) {
			a := s.candidate(t, table, "listen-"+name, candOpts{})
			b := s.candidate(t, table, "listen-"+name, candOpts{noWait: true})
			bb := s.backend(t, b.db, table, "listen-"+name, func(c *testConfig) { c.Listen = listen })
			la := acquire(t, a, "a")
			ctx, cancel := context.WithTimeout(context.Background(), 10*testTTL)
			defer cancel()
			ch := backendtest.AcquireAsync(ctx, bb, "b")
			time.Sleep(300 * time.Millisecond)
			released := time.Now()
			release(t, la)
			r := <-ch
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			took := r.At.Sub(released)
			t.Logf("handover with a %s listen connection: %v (PollInterval %v)", name, ms(took), s.poll)
			// Polling alone hands over within a poll and its round trips;
			// the bound leaves room for a loaded machine (a release wakes
			// no one here, so without polling the wait would not end).
			if took > s.poll+2*time.Second {
				t.Errorf("handover took %v, want within PollInterval + 2s", took)
			}
			start := time.Now()
			release(t, r.Lease)
			if d := time.Since(start); d > time.Second {
				t.Errorf("Release took %v", d)
			}
		})
	}
}

// TestEnsureSchema_UpgradesAnOldRunsTable: a runs table created before
// the attempts column (an earlier schema file) gets it from EnsureSchema,
// idempotently; its rows are kept, read as one attempt, and Finish then
// stores attempts.
func TestEnsureSchema_UpgradesAnOldRunsTable(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table := s.newTable(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := s.admin.ExecContext(ctx, "ALTER TABLE "+table+"_runs DROP COLUMN attempts"); err != nil {
			t.Fatal(err)
		}
		b := s.backend(t, s.admin, table, "upgrade", nil)
		if err := b.Check(ctx); !errors.Is(err, sql.ErrSchemaMissing) || !strings.Contains(err.Error(), table+"_runs") {
			t.Errorf("Check of the old table = %v, want ErrSchemaMissing naming %s_runs", err, table)
		}
		// The old layout claims, as an old version of this package did.
		l := acquire(t, b, "x")
		defer release(t, l)
		tick := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
		if errs := b.Ledger().Claim(ctx, []ledger.Claim{{Job: "old", Tick: tick, Token: l.Token(), Instance: "x", Started: tick}}); errs[0] != nil {
			t.Fatalf("Claim on the old table: %v", errs[0])
		}
		for range 2 {
			if err := b.EnsureSchema(ctx); err != nil {
				t.Fatalf("EnsureSchema: %v", err)
			}
		}
		runs, err := b.Ledger().History(ctx, "old", 10)
		if err != nil || len(runs) != 1 || runs[0].Attempts != 0 || runs[0].Result != ledger.ResultRunning {
			t.Fatalf("History after the upgrade = %+v, %v; want the claimed run, running, attempts 0", runs, err)
		}
		done := runs[0]
		done.Result, done.Ended, done.Attempts = ledger.ResultOK, tick.Add(time.Second), 3
		if errs := b.Ledger().Finish(ctx, []ledger.Run{done}); errs[0] != nil {
			t.Fatalf("Finish: %v", errs[0])
		}
		if runs, err := b.Ledger().History(ctx, "old", 10); err != nil || len(runs) != 1 || runs[0].Attempts != 3 {
			t.Errorf("History after Finish = %+v, %v; want attempts 3", runs, err)
		}
	})
}

// TestEnsureSchema_AddsTheControlTable: a schema made before the control
// store (no _control table, no _control_seq sequence on PostgreSQL)
// fails Check naming it, and a control write there fails with
// ErrSchemaMissing; EnsureSchema adds it, and the control store works.
func TestEnsureSchema_AddsTheControlTable(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		table := s.newTable(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		drops := []string{"DROP TABLE " + table + "_control"}
		if s.name == "postgres" {
			drops = append(drops, "DROP SEQUENCE "+table+"_control_seq")
		}
		for _, q := range drops {
			if _, err := s.admin.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		b := s.backend(t, s.admin, table, "upgrade", nil)
		if err := b.Check(ctx); !errors.Is(err, sql.ErrSchemaMissing) || !strings.Contains(err.Error(), table+"_control") {
			t.Errorf("Check of the old schema = %v, want ErrSchemaMissing naming %s_control", err, table)
		}
		if _, err := b.Control().Put(ctx, control.Put{Key: "pause/x", Value: []byte("{}")}); !errors.Is(err, sql.ErrSchemaMissing) {
			t.Errorf("Put on the old schema = %v, want ErrSchemaMissing", err)
		}
		if err := b.EnsureSchema(ctx); err != nil {
			t.Fatalf("EnsureSchema: %v", err)
		}
		if err := b.Check(ctx); err != nil {
			t.Errorf("Check after EnsureSchema: %v", err)
		}
		if v, err := b.Control().Put(ctx, control.Put{Key: "pause/x", Value: []byte("{}")}); err != nil || v <= 0 {
			t.Errorf("Put after EnsureSchema = %d, %v", v, err)
		}
	})
}
