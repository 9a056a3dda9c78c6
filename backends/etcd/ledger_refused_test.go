package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/ledger"
)

// A claim and a finish the server refuses for want of a permission (the
// user's role loses the ledger prefix while its term leads) are marked
// ledger.ErrRefused.
func TestLedger_PermissionRevokedIsRefused(t *testing.T) {
	srv, ca, root, pfx := startPasswordEtcd(t)
	b := newBackend(t, mustSecureClient(t, srv, creds{ca: ca, user: "baton", pass: "baton-secret"}), pfx, 3*time.Second)
	l := backendtest.Acquire(t, b, "a", acquireWithin)
	defer backendtest.Release(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	led := b.Ledger()
	tick := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	if err := led.Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick, Token: l.Token(), Instance: "a", Started: tick}})[0]; err != nil {
		t.Fatalf("claim with the election's role: %v", err)
	}
	role := "baton-" + strings.ReplaceAll(strings.Trim(pfx, "/"), "/", "-")
	lp := pfx + "-ledger/"
	if _, err := root.RoleRevokePermission(ctx, role, lp, clientv3.GetPrefixRangeEnd(lp)); err != nil {
		t.Fatal(err)
	}
	if _, err := root.RoleGrantPermission(ctx, role, lp, clientv3.GetPrefixRangeEnd(lp), clientv3.PermissionType(clientv3.PermRead)); err != nil {
		t.Fatal(err)
	}
	err := led.Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick.Add(time.Second), Token: l.Token(), Instance: "a", Started: tick}})[0]
	if !errors.Is(err, ledger.ErrRefused) {
		t.Errorf("claim with the ledger read-only: %v, want ErrRefused", err)
	}
	err = led.Finish(ctx, []ledger.Run{{Job: "j", Tick: tick, Token: l.Token(), Instance: "a", Started: tick, Ended: tick, Result: ledger.ResultOK}})[0]
	if !errors.Is(err, ledger.ErrRefused) {
		t.Errorf("finish with the ledger read-only: %v, want ErrRefused", err)
	}
}
