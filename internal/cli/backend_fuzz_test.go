package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// FuzzBackendFlags gives the backend flags any values (one NAME=VALUE per
// line, NAME a flag of BackendFlags) and builds the client configuration
// of each backend from them, without connecting. No builder panics; each
// error names the flag it is about (--NAME), so that `baton run` can say
// which config line or variable it came from.
func FuzzBackendFlags(f *testing.F) {
	for _, seed := range []string{
		"backend=etcd\nendpoints=http://127.0.0.1:2379,http://127.0.0.1:22379",
		"endpoints=127.0.0.1:2379\netcd-cacert=/nonexistent/ca.pem",
		"endpoints=http://127.0.0.1:2379\netcd-cert=c.pem",
		"etcd-user=root",
		"etcd-password-file=/nonexistent",
		"backend=consul\nconsul-addr=127.0.0.1:8500\nconsul-cacert=/nonexistent",
		"consul-addr=http://[::1]:8500",
		"backend=redis\nredis-sentinel=127.0.0.1:26379\nredis-master=m",
		"redis-cluster=127.0.0.1:7000,127.0.0.1:7001\nredis-wait-replicas=2",
		"redis-addr=127.0.0.1:6379\nredis-tls=true\nredis-cert=c.pem",
		"redis-username=baton\nredis-password-file=",
		"redis-sentinel-username=w",
		"redis-addr=\x00",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var b BackendFlags
		fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		b.Register(fs)
		for _, line := range strings.Split(in, "\n") {
			name, value, ok := strings.Cut(line, "=")
			if !ok || fs.Lookup(name) == nil {
				continue
			}
			if err := fs.Set(name, value); err != nil {
				return // the flag package refuses it: what a user sees at parse time
			}
		}
		check := func(what string, err error) {
			if err != nil && !strings.Contains(err.Error(), "--") {
				t.Errorf("%s: error names no flag: %v", what, err)
			}
		}
		_, err := b.etcdConfig()
		check("etcd", err)
		_, err = b.consulConfig()
		check("consul", err)
		_, err = b.redisConfig()
		check("redis", err)
	})
}
