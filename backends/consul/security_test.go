package consul_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/envtest"
)

const managementToken = "5ba7a9e2-6c1d-4f4e-9a55-b47015c0ffee"

// aclToken creates a policy with rules and a token linked to it, and
// returns the token's secret.
func aclToken(t *testing.T, mgmt *api.Client, name, rules string) string {
	t.Helper()
	pol, _, err := mgmt.ACL().PolicyCreate(&api.ACLPolicy{Name: name, Rules: rules}, nil)
	if err != nil {
		t.Fatalf("create policy %s: %v", name, err)
	}
	tok, _, err := mgmt.ACL().TokenCreate(&api.ACLToken{Description: name, Policies: []*api.ACLTokenPolicyLink{{ID: pol.ID}}}, nil)
	if err != nil {
		t.Fatalf("create token %s: %v", name, err)
	}
	return tok.SecretID
}

// leastPrivilege is the smallest policy an election on key needs: the
// key_prefix rule covers the lock key and its ledger (key + "-ledger/");
// sessions are created on the agent's node.
func leastPrivilege(key string) string {
	return fmt.Sprintf(`key_prefix %q { policy = "write" }
session %q { policy = "write" }`, key, consultest.NodeName)
}

func tokenBackend(t *testing.T, a *consultest.Agent, key, token string) *consul.Backend {
	t.Helper()
	return backendOn(t, agentClient(t, a, "", token), key, nil)
}

// TestSecurity_ACL runs a dev agent with ACLs on (default policy deny).
// A token with the least-privilege policy campaigns, hands over and
// claims ticks; a missing, unknown or too weak token fails Check at once
// with Consul's reason, instead of an Acquire retry loop.
func TestSecurity_ACL(t *testing.T) {
	a := consultest.StartTWith(t, consultest.Options{ACLManagementToken: managementToken})
	mgmt, err := a.ClientWithToken("", a.ManagementToken)
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	good := aclToken(t, mgmt, "baton-election", leastPrivilege(key))

	t.Run("LeastPrivilegeToken", func(t *testing.T) {
		backendtest.RunSmoke(t, tokenBackend(t, a, key, good), tokenBackend(t, a, key, good), 30*time.Second)
	})
	for _, tc := range []struct {
		name, token, key string
		want             []string
	}{
		{"NoToken", "", key, []string{"read:", "403", "anonymous token lacks permission 'key:read'"}},
		{"UnknownToken", "00000000-1111-2222-3333-444444444444", key, []string{"read:", "403 (ACL not found)", "does not know the ACL token"}},
		{"TokenForAnotherKey", good, newKey(t), []string{"read:", "lacks permission 'key:read'", "needs key_prefix"}},
		{"ReadOnlyToken", aclToken(t, mgmt, "read-only", fmt.Sprintf(`key_prefix %q { policy = "read" }
session %q { policy = "write" }`, key, consultest.NodeName)), key, []string{"write probe:", "lacks permission 'key:write'", key + "-ledger/"}},
		{"NoLedger", aclToken(t, mgmt, "no-ledger", fmt.Sprintf(`key %q { policy = "write" }
session %q { policy = "write" }`, key, consultest.NodeName)), key, []string{"write probe:", "lacks permission 'key:write' on \"" + key + "-ledger/baton-check\""}},
		{"NoSession", aclToken(t, mgmt, "no-session", fmt.Sprintf(`key_prefix %q { policy = "write" }`, key)), key,
			[]string{"create session:", "lacks permission 'session:write' on \"" + consultest.NodeName + "\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := backendtest.CheckFails(t, tokenBackend(t, a, tc.key, tc.token), 2*time.Second)
			envtest.WantErrors(t, err, tc.want)
		})
	}
	t.Run("CheckLeavesNothing", func(t *testing.T) {
		if err := tokenBackend(t, a, key, good).Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		pairs, _, err := mgmt.KV().List(key, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pairs {
			if strings.Contains(p.Key, "baton-check") {
				t.Errorf("Check left %s", p.Key)
			}
		}
		sessions, _, err := mgmt.Session().List(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sessions {
			if strings.HasPrefix(s.Name, "baton check") {
				t.Errorf("Check left session %s (%s)", s.ID, s.Name)
			}
		}
	})
}

// TestBackend_Check passes on an agent without ACLs and leaves no session.
func TestBackend_Check(t *testing.T) {
	a := sharedAgent(t)
	c := newCandidate(t, a, newKey(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	c.proxy.Blackhole()
	defer c.proxy.Heal()
	sctx, scancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer scancel()
	if err := c.Check(sctx); err == nil {
		t.Error("Check succeeded over a cut network")
	}
}
