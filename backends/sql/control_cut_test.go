package sql_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/control"
)

// TestControl_PutCutMidTransaction: a leader's fenced control put (the
// term's record, an operator's pause) is cut off by a silent partition
// (faultproxy's Blackhole: the TCP connection stays open, nothing
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
