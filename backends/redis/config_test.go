package redis_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
)

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  redis.Config
		want []string
	}{
		{"ok", redis.Config{Addr: "127.0.0.1:6379", Election: "reports"}, nil},
		{"ok nested name", redis.Config{Addr: "h:1", Election: "team-a/reports.eu_1:x"}, nil},
		{"empty", redis.Config{}, []string{`Addr "": required`, `Election "": must be 1 to 200`}},
		{"braces", redis.Config{Addr: "h:1", Election: "a{b}"}, []string{`Election "a{b}"`}},
		{"glob", redis.Config{Addr: "h:1", Election: "a*"}, []string{`Election "a*"`}},
		{"ttl", redis.Config{Addr: "h:1", Election: "e", Timing: election.Timing{TTL: 500 * time.Millisecond}},
			[]string{"TTL 500ms: below the backend minimum 1s"}},
		{"ttl unit", redis.Config{Addr: "h:1", Election: "e", Timing: election.Timing{TTL: 2*time.Second + time.Microsecond}},
			[]string{"must be a whole multiple of 1ms"}},
		{"renew", redis.Config{Addr: "h:1", Election: "e", Timing: election.Timing{TTL: 3 * time.Second, RenewInterval: 2 * time.Second}},
			[]string{"TTL 3s: must be greater than 2*RenewInterval (4s)"}},
		{"batch", redis.Config{Addr: "h:1", Election: "e", MaxBatch: redis.MaxMaxBatch + 1}, []string{"MaxBatch 5001: must be between 1 and 5000"}},
		{"history", redis.Config{Addr: "h:1", Election: "e", History: -1}, []string{"History -1: must be positive"}},
		{"ok sentinel", redis.Config{SentinelAddrs: []string{"h:1", "h:2"}, MasterName: "m", Election: "e", WaitReplicas: 1}, nil},
		{"ok cluster", redis.Config{ClusterAddrs: []string{"h:1"}, Election: "e"}, nil},
		{"two modes", redis.Config{Addr: "h:1", ClusterAddrs: []string{"h:2"}, Election: "e"},
			[]string{`Addr "h:1", SentinelAddrs [], ClusterAddrs ["h:2"]: give exactly one`}},
		{"sentinel without master", redis.Config{SentinelAddrs: []string{"h:1"}, Election: "e"},
			[]string{`MasterName "": required with SentinelAddrs ["h:1"]`}},
		{"master without sentinel", redis.Config{Addr: "h:1", MasterName: "m", Election: "e"}, []string{`MasterName "m": only with SentinelAddrs`}},
		{"bad addr", redis.Config{ClusterAddrs: []string{"h:1", "nope"}, Election: "e"}, []string{`ClusterAddrs ["h:1" "nope"]: "nope" is not host:port`}},
		{"wait", redis.Config{Addr: "h:1", Election: "e", WaitReplicas: -1, WaitTimeout: 3 * time.Second},
			[]string{"WaitReplicas -1: must not be negative", "WaitTimeout 3s: must be whole milliseconds, from 1ms to TTL/2 (2.5s)"}},
		{"user without password", redis.Config{Addr: "h:1", Election: "e", Username: "baton"}, []string{`Password "": required with Username "baton"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			envtest.WantErrors(t, err, tt.want)
			if _, nerr := redis.New(tt.cfg); (nerr == nil) != (err == nil) {
				t.Errorf("New error %v, Validate error %v", nerr, err)
			}
			if err != nil && len(tt.want) > 0 {
				envtest.WantErrors(t, err, []string{"redis: invalid config: "})
			}
		})
	}
}
