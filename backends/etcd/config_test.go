package etcd_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
)

func TestConfig_Validate(t *testing.T) {
	cli := &clientv3.Client{} // never used: Validate does no I/O
	tests := []struct {
		name string
		cfg  etcd.Config
		want []string // substrings of the error; none means valid
	}{
		{"defaults", etcd.Config{Client: cli, Prefix: "/baton/elections/x"}, nil},
		{"ttl 2s", etcd.Config{Client: cli, Prefix: "/p", Timing: election.Timing{TTL: 2 * time.Second}}, nil},
		{"missing client and prefix", etcd.Config{}, []string{"Client (or Endpoints) <nil>: required", `Prefix "": required`}},
		{"trailing slash", etcd.Config{Client: cli, Prefix: "/p/"}, []string{`Prefix "/p/": must not end with a slash`}},
		{"inside a ledger", etcd.Config{Client: cli, Prefix: "/baton/elections/reports-ledger/nightly"},
			[]string{`Prefix "/baton/elections/reports-ledger/nightly": "reports-ledger" is where election "/baton/elections/reports" keeps its ledger`}},
		{"a ledger's name", etcd.Config{Client: cli, Prefix: "/baton/elections/reports-ledger"},
			[]string{`Prefix "/baton/elections/reports-ledger": "reports-ledger" is where election "/baton/elections/reports" keeps its ledger`}},
		{"-ledger alone is no ledger", etcd.Config{Client: cli, Prefix: "/baton/-ledger/x"}, nil},
		{"ttl below minimum", etcd.Config{Client: cli, Prefix: "/p", Timing: election.Timing{TTL: time.Second}},
			[]string{"TTL 1s: below the backend minimum 2s"}},
		{"fractional ttl", etcd.Config{Client: cli, Prefix: "/p", Timing: election.Timing{TTL: 2500 * time.Millisecond}},
			[]string{"TTL 2.5s: must be a whole multiple of 1s"}},
		{"renew interval too long", etcd.Config{Client: cli, Prefix: "/p", Timing: election.Timing{TTL: 6 * time.Second, RenewInterval: 3 * time.Second}},
			[]string{"TTL 6s: must be greater than 2*RenewInterval (6s)"}},
		{"safety margin too long", etcd.Config{Client: cli, Prefix: "/p", Timing: election.Timing{TTL: 3 * time.Second, SafetyMargin: 2 * time.Second}},
			[]string{"SafetyMargin 2s: must be less than TTL - RenewInterval (2s)"}},
		{"negative durations", etcd.Config{Client: cli, Prefix: "/p", Timing: election.Timing{RenewInterval: -time.Second, SafetyMargin: -time.Second}},
			[]string{"RenewInterval -1s: must be positive", "SafetyMargin -1s: must be positive"}},
		{"negative history", etcd.Config{Client: cli, Prefix: "/p", History: -1}, []string{"History -1: must be positive"}},
		{"max txn ops 5", etcd.Config{Client: cli, Prefix: "/p", MaxTxnOps: 5}, nil},
		{"max txn ops 1024", etcd.Config{Client: cli, Prefix: "/p", MaxTxnOps: 1024}, nil},
		{"max txn ops too few", etcd.Config{Client: cli, Prefix: "/p", MaxTxnOps: 4},
			[]string{"MaxTxnOps 4: must be at least 5 (one claim takes 4 operations nested in its batch's transaction"}},
		{"negative max txn ops", etcd.Config{Client: cli, Prefix: "/p", MaxTxnOps: -1}, []string{"MaxTxnOps -1: must be at least 5"}},
		{"endpoints", etcd.Config{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/p"}, nil},
		{"client and endpoints", etcd.Config{Client: cli, Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/p"},
			[]string{`Endpoints ["127.0.0.1:2379"]: set Client or Endpoints, not both`}},
		{"an empty endpoint", etcd.Config{Endpoints: []string{""}, Prefix: "/p"}, []string{`Endpoints[0] "": empty`}},
		{"everything at once", etcd.Config{Timing: election.Timing{TTL: 1500 * time.Millisecond}},
			[]string{"Client (or Endpoints) <nil>", `Prefix ""`, "TTL 1.5s: below the backend minimum 2s", "TTL 1.5s: must be a whole multiple of 1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			envtest.WantErrors(t, tt.cfg.Validate(), tt.want)
			if len(tt.want) == 0 {
				return
			}
			if _, nerr := etcd.New(tt.cfg); nerr == nil {
				t.Errorf("New accepted a config Validate rejects")
			}
		})
	}
}

func TestNew_DoesNotMutateConfig(t *testing.T) {
	cfg := etcd.Config{Client: &clientv3.Client{}, Prefix: "/p"}
	b, err := etcd.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timing.TTL != 0 || cfg.Logger != nil {
		t.Errorf("New changed the caller's Config: %+v", cfg)
	}
	if got := b.Timing(); got.TTL != etcd.DefaultTTL || got.RenewInterval != etcd.DefaultTTL/3 || got.SafetyMargin != time.Second {
		t.Errorf("Timing() = %+v, want TTL 5s, RenewInterval TTL/3, SafetyMargin 1s", got)
	}
}
