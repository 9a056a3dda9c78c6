package consul_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/ledger"
)

// A claim and a finish the agent refuses for want of a permission (the
// token's policy loses write on the ledger while its term leads) are
// marked ledger.ErrRefused.
func TestLedger_PolicyNarrowedIsRefused(t *testing.T) {
	a := consultest.StartTWith(t, consultest.Options{ACLManagementToken: managementToken})
	mgmt, err := a.ClientWithToken("", a.ManagementToken)
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	pol, _, err := mgmt.ACL().PolicyCreate(&api.ACLPolicy{Name: "narrowed", Rules: leastPrivilege(key)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := mgmt.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: pol.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := tokenBackend(t, a, key, tok.SecretID)
	l := backendtest.Acquire(t, b, "a", 10*time.Second)
	defer backendtest.Release(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	led := b.Ledger()
	tick := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	if err := led.Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick, Token: l.Token(), Instance: "a", Started: tick}})[0]; err != nil {
		t.Fatalf("claim with the least-privilege policy: %v", err)
	}
	pol.Rules = fmt.Sprintf(`key %q { policy = "write" }
key_prefix %q { policy = "read" }
session %q { policy = "write" }`, key, key+"-ledger/", consultest.NodeName)
	if _, _, err := mgmt.ACL().PolicyUpdate(pol, nil); err != nil {
		t.Fatal(err)
	}
	err = led.Claim(ctx, []ledger.Claim{{Job: "j", Tick: tick.Add(time.Second), Token: l.Token(), Instance: "a", Started: tick}})[0]
	if !errors.Is(err, ledger.ErrRefused) {
		t.Errorf("claim with the ledger read-only: %v, want ErrRefused", err)
	}
	err = led.Finish(ctx, []ledger.Run{{Job: "j", Tick: tick, Token: l.Token(), Instance: "a", Started: tick, Ended: tick, Result: ledger.ResultOK}})[0]
	if !errors.Is(err, ledger.ErrRefused) {
		t.Errorf("finish with the ledger read-only: %v, want ErrRefused", err)
	}
}
