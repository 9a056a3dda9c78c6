package sql_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// TestControl_PutCutMidTransaction: a leader's fenced control put (the
// term's record, an operator's pause) is cut off by a silent partition
// (proxytest's Blackhole: the TCP connection stays open, nothing
// passes) while its transaction holds the lease row's share lock. The
// server ends the transaction after a second idle, so the next candidate
// takes over within the TTL and a few seconds. Without that, the takeover
// waits for the share lock until the server drops the dead connection:
// on MariaDB each attempt gives up after innodb_lock_wait_timeout (50 s),
// and the connection lives until wait_timeout (8 h); on PostgreSQL, until
// its TCP keepalives find the peer gone (hours).
func TestControl_PutCutMidTransaction(t *testing.T) {
	forEachServer(t, func(t *testing.T, s *server) {
		if s.name == "mariadb" && !hasIdleTransactionTimeout(s.admin) {
			t.Skip("the server has no idle_transaction_timeout (MySQL)")
		}
		const bound = testTTL + 3*time.Second // the idle timeout is 1 s
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		table := s.newTable(t)
		a := s.candidate(t, table, "cut", candOpts{})
		la := acquire(t, a, "a")
		db := s.open(s.target, "") // b is connected directly
		t.Cleanup(func() { db.Close() })
		b := s.backend(t, db, table, "cut", nil)

		var cutAt time.Time
		cut := make(chan struct{})
		sql.SetControlStep(a.Backend, func() {
			a.proxy.Blackhole()
			cutAt = time.Now()
			close(cut)
		})
		acq := backendtest.AcquireAsync(ctx, b, "b")
		put := make(chan error, 1)
		go func() {
			_, err := a.Control().Put(ctx, control.Put{Key: "pause/j", Value: []byte("x"), IfVersion: control.AnyVersion, Token: la.Token()})
			put <- err
		}()
		var r backendtest.Result
		gotLease := false
		defer func() {
			cancel()
			if !gotLease {
				r = <-acq
			}
			if r.Lease != nil {
				release(t, r.Lease)
			}
			a.proxy.Reset() // drops what the proxy holds
			a.proxy.Heal()
			<-put
			release(t, la)
		}()
		select {
		case <-cut:
		case <-ctx.Done():
			t.Fatal("the put never share-locked the lease row")
		}
		r = takeover(t, ctx, acq, cutAt, bound)
		gotLease = true
		if r.Err != nil {
			t.FailNow()
		}
	})
}

// TestLedger_ClaimCutMidTransaction (MariaDB): a leader's batched claim
// is cut off by a silent partition (proxytest's Blackhole: the TCP
// connections stay open, nothing passes) while both of its transactions
// are open, past the lease row's share lock and the inserts of the new
// tick rows. The server rolls them back after their
// idle_transaction_timeout (1 s, set by the claim), so the next candidate
// takes over within the TTL and a few seconds; without it, the takeover
// waits for the share lock until the server drops the dead connection
// (wait_timeout, 8 h by default), each attempt giving up after
// innodb_lock_wait_timeout (50 s by default). The cut claims fail, the
// cut leader's term ends, and nothing of its transactions was recorded:
// the new leader claims the same ticks, once.
func TestLedger_ClaimCutMidTransaction(t *testing.T) {
	s := getServer(t, "mariadb")
	if !hasIdleTransactionTimeout(s.admin) {
		t.Skip("the server has no idle_transaction_timeout (MySQL): a claim cut mid-transaction holds the lease row until the server drops its connection")
	}
	const (
		electionName = "cut"
		bound        = testTTL + 3*time.Second // the idle timeout is 1 s
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	table := s.newTable(t)
	a := s.candidate(t, table, electionName, candOpts{})
	la := acquire(t, a, "a")
	db := s.open(s.target, "") // b is connected directly
	t.Cleanup(func() { db.Close() })
	b := s.backend(t, db, table, electionName, nil)

	lg := a.Ledger()
	n := 2*lg.MaxBatch() - 200 // two chunks, both in flight at once
	jobs := make([]string, n)
	for i := range jobs {
		jobs[i] = fmt.Sprintf("job-%04d", i)
	}
	// Every chunk's transaction reaches statement 3 (tick rows inserted,
	// uncommitted); the last one to get there cuts the network, and
	// then each goes on to its next statement, which the proxy holds.
	var (
		arrived atomic.Int32
		cutAt   time.Time
		cut     = make(chan struct{})
	)
	sql.SetClaimStep(a.Backend, func(done int) {
		if done != 3 {
			return
		}
		if arrived.Add(1) == 2 {
			a.proxy.Blackhole()
			cutAt = time.Now()
			close(cut)
		}
		select {
		case <-cut:
		case <-ctx.Done():
		}
	})

	// b waits to lead; a claims. Both goroutines are drained before the
	// test returns, whatever happens.
	acq := backendtest.AcquireAsync(ctx, b, "b")
	claimed := make(chan []error, 1)
	go func() { claimed <- lg.Claim(ctx, claims(jobs, tick0, la.Token())) }()
	var (
		errs     []error
		r        backendtest.Result
		gotErrs  bool
		gotLease bool
	)
	defer func() {
		cancel()
		if !gotErrs {
			<-claimed
		}
		if !gotLease {
			r = <-acq
		}
		if r.Lease != nil {
			release(t, r.Lease)
		}
		a.proxy.Reset() // drops what the proxy holds: the cut statements never reach the server
		a.proxy.Heal()
		release(t, la)
	}()

	select {
	case <-cut:
	case <-ctx.Done():
		t.Fatalf("the claim's transactions never both reached statement 3 (%d did)", arrived.Load())
	}
	t.Logf("cut with both transactions open, %d claims", n)

	// a's claims fail, as errors that are neither refusal: their outcome
	// was not known to a. (Here after about a second: the server closes
	// the connections it killed, and proxytest, which holds bytes but not
	// closes, passes that on; across a real partition they would fail at
	// QueryTimeout, the TTL.)
	select {
	case errs = <-claimed:
		gotErrs = true
	case <-ctx.Done():
		t.Fatal("a's claim did not return")
	}
	t.Logf("a's claims returned %v after the cut: %v", ms(time.Since(cutAt)), errs[0])
	bad := 0
	for i, err := range errs {
		if err == nil || errors.Is(err, ledger.ErrTickClaimed) || errors.Is(err, ledger.ErrStaleTerm) {
			if bad++; bad <= 3 {
				t.Errorf("a's claim %d (%s): %v, want an error that is neither refusal", i, jobs[i], err)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of a's %d claims did not fail as cut off", bad, n)
	}

	// a's term ends: its renewals no longer reach the server.
	select {
	case <-la.Done():
		t.Logf("a's term ended %v after the cut: %v", ms(time.Since(cutAt)), la.Err())
	case <-ctx.Done():
		t.Fatal("a's term did not end after the cut")
	}

	// b takes over: once a's lease expired (at most a TTL after the cut)
	// and the server rolled back a's transactions, releasing the lease
	// row.
	r = takeover(t, ctx, acq, cutAt, bound)
	gotLease = true
	if r.Err != nil {
		t.FailNow()
	}

	// Nothing of a's transactions was recorded: b claims every tick,
	// once; a second claim is refused.
	lb := b.Ledger()
	wantAll(t, "b's claims of a's ticks", lb.Claim(ctx, claims(jobs, tick0, r.Lease.Token())), n, nil)
	wantAll(t, "b's claims again", lb.Claim(ctx, claims(jobs, tick0, r.Lease.Token())), n, ledger.ErrTickClaimed)
	for _, tab := range []string{table + "_ticks", table + "_runs"} {
		var rows, keys int
		var lo, hi uint64
		if err := s.admin.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT job), MIN(token), MAX(token) FROM "+tab+
			" WHERE election = ?", electionName).Scan(&rows, &keys, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if rows != n || keys != n || lo != r.Lease.Token() || hi != r.Lease.Token() {
			t.Errorf("%s: %d rows of %d jobs, tokens %d to %d; want %d rows, one per job, all of b's token %d (a's %d)",
				tab, rows, keys, lo, hi, n, r.Lease.Token(), la.Token())
		}
	}
}

// takeover waits for b's Acquire (acq) after a cut at cutAt and fails t
// unless it led within bound: once the cut leader's lease expired (at
// most a TTL after the cut) and the server had ended its transaction (a
// second idle), releasing the lease row. A result that is still to come
// when ctx ends is waited for all the same. It reports with t.Errorf:
// the caller, which owns the lease, stops t when the Acquire failed.
func takeover(t *testing.T, ctx context.Context, acq <-chan backendtest.Result, cutAt time.Time, bound time.Duration) backendtest.Result {
	t.Helper()
	var r backendtest.Result
	select {
	case r = <-acq:
	case <-ctx.Done():
		r = <-acq
	}
	took := r.At.Sub(cutAt)
	if r.Err != nil {
		t.Errorf("b: Acquire: %v, %v after the cut (want a takeover within %v)", r.Err, ms(took), bound)
		return r
	}
	t.Logf("b took over %v after the cut", ms(took))
	if took > bound {
		t.Errorf("b took over %v after the cut, want within %v (TTL %v, idle transaction timeout 1 s)", ms(took), bound, testTTL)
	}
	return r
}
