package pghatest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/internal/pghatest"
)

// execSQL runs q on a connection of its own to the pair's database on s.
func execSQL(t *testing.T, ctx context.Context, s *pghatest.Server, q string, args ...any) {
	t.Helper()
	c := connect(t, ctx, s)
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, q, args...); err != nil {
		t.Fatalf("%s on %v: %v", q, s, err)
	}
}

// rows returns the values of table r on s, in order.
func rows(t *testing.T, ctx context.Context, s *pghatest.Server) []int {
	t.Helper()
	c := connect(t, ctx, s)
	defer c.Close(context.Background())
	rs, err := c.Query(ctx, `SELECT n FROM r ORDER BY n`)
	if err != nil {
		t.Fatalf("rows on %v: %v", s, err)
	}
	ns, err := pgx.CollectRows(rs, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("rows on %v: %v", s, err)
	}
	return ns
}

func connect(t *testing.T, ctx context.Context, s *pghatest.Server) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, s.DSN(pghatest.DefaultDatabase))
	if err != nil {
		t.Fatalf("connect to %v: %v", s, err)
	}
	return c
}

func syncState(t *testing.T, ctx context.Context, p *pghatest.Pair) string {
	t.Helper()
	c := connect(t, ctx, p.Primary())
	defer c.Close(context.Background())
	var state string
	if err := c.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'`,
		p.Standby().Name).Scan(&state); err != nil {
		t.Fatalf("pg_stat_replication on %v: %v", p.Primary(), err)
	}
	return state
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFailover_Sync fails over a synchronous pair three times in a row.
// Each time, every row acknowledged before the kill is on the promoted
// standby, the roles swap while the servers keep their ports, and the
// rebuilt server streams as the synchronous standby, which applied the
// next write before it was acknowledged.
func TestFailover_Sync(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	t.Parallel()
	start := time.Now()
	p := pghatest.StartT(t, pghatest.Options{Sync: true})
	t.Logf("Start (sync): %v", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	servers := p.Servers()
	if p.Primary() != servers[0] || p.Standby() != servers[1] {
		t.Fatalf("after Start: primary %v, standby %v; want pg0 and pg1", p.Primary(), p.Standby())
	}
	ports := [2]int{servers[0].Port, servers[1].Port}
	if got := syncState(t, ctx, p); got != "sync" {
		t.Fatalf("sync_state = %q, want sync", got)
	}
	execSQL(t, ctx, p.Primary(), `CREATE TABLE r (n int PRIMARY KEY)`)
	execSQL(t, ctx, p.Primary(), `INSERT INTO r VALUES (0)`)
	want := []int{0}
	for i := 1; i <= 3; i++ {
		execSQL(t, ctx, p.Primary(), `INSERT INTO r VALUES ($1)`, i)
		want = append(want, i)
		oldPrimary, oldStandby := p.Primary(), p.Standby()
		ft, err := p.Failover(ctx)
		if err != nil {
			t.Fatalf("failover %d: %v", i, err)
		}
		t.Logf("failover %d: %s -> %s: primary away %v, rebuild %v", i, oldPrimary.Name, oldStandby.Name,
			ft.Away.Round(time.Millisecond), ft.Rebuild.Round(time.Millisecond))
		if p.Primary() != oldStandby || p.Standby() != oldPrimary {
			t.Fatalf("failover %d: primary %v, standby %v; want the roles swapped", i, p.Primary(), p.Standby())
		}
		if s := p.Servers(); s != servers || s[0].Port != ports[0] || s[1].Port != ports[1] {
			t.Fatalf("failover %d: servers %v, want %v on ports %v", i, s, servers, ports)
		}
		if got := rows(t, ctx, p.Primary()); !equal(got, want) {
			t.Fatalf("failover %d: rows on the promoted %v: %v, want %v", i, p.Primary(), got, want)
		}
		if got := syncState(t, ctx, p); got != "sync" {
			t.Fatalf("failover %d: sync_state = %q, want sync", i, got)
		}
	}
	// remote_apply: an acknowledged write is visible on the standby at once.
	execSQL(t, ctx, p.Primary(), `INSERT INTO r VALUES (4)`)
	want = append(want, 4)
	if got := rows(t, ctx, p.Standby()); !equal(got, want) {
		t.Fatalf("rows on the standby %v right after an acknowledged write: %v, want %v", p.Standby(), got, want)
	}
}

// TestFailover_Async: without Options.Sync the standby streams
// asynchronously, before and after a failover, and catches up. Promote
// refuses to make a second primary while the first runs, and Rebuild
// has nothing to rebuild before a promotion.
func TestFailover_Async(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	t.Parallel()
	start := time.Now()
	p := pghatest.StartT(t, pghatest.Options{})
	t.Logf("Start (async): %v", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	if got := syncState(t, ctx, p); got != "async" {
		t.Fatalf("sync_state = %q, want async", got)
	}
	pri, sb := p.Primary(), p.Standby()
	if err := p.Promote(ctx); err == nil {
		t.Fatal("Promote with the primary running: no error")
	}
	if err := p.Rebuild(ctx); err == nil {
		t.Fatal("Rebuild with no demoted server: no error")
	}
	if p.Primary() != pri || p.Standby() != sb || pri.Role() != pghatest.RolePrimary || sb.Role() != pghatest.RoleStandby {
		t.Fatalf("after a refused Promote and Rebuild: primary %v, standby %v", p.Primary(), p.Standby())
	}
	execSQL(t, ctx, p.Primary(), `CREATE TABLE r (n int PRIMARY KEY)`)
	execSQL(t, ctx, p.Primary(), `INSERT INTO r VALUES (1)`)
	if err := p.CaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, ctx, p.Standby()); !equal(got, []int{1}) {
		t.Fatalf("rows on the caught-up standby: %v, want [1]", got)
	}
	ft, err := p.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover: primary away %v, rebuild %v", ft.Away.Round(time.Millisecond), ft.Rebuild.Round(time.Millisecond))
	if got := syncState(t, ctx, p); got != "async" {
		t.Fatalf("after the failover: sync_state = %q, want async", got)
	}
	execSQL(t, ctx, p.Primary(), `INSERT INTO r VALUES (2)`)
	if err := p.CaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, ctx, p.Standby()); !equal(got, []int{1, 2}) {
		t.Fatalf("rows on the rebuilt standby: %v, want [1 2]", got)
	}
}
