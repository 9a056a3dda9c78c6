package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Sentinel credentials flags reach the Redis configuration, the
// password from its file or the environment, never from the command line.
func TestRedisSentinelCredentials(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "sentinel-pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) (*BackendFlags, error) {
		var b BackendFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		b.Register(fs)
		return &b, fs.Parse(append([]string{"--backend", "redis", "--election", "e"}, args...))
	}
	b, err := parse("--redis-sentinel", "127.0.0.1:26379,127.0.0.1:26380", "--redis-master", "m",
		"--redis-sentinel-username", "watcher", "--redis-sentinel-password-file", pwFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := b.redisConfig()
	if err != nil {
		t.Fatalf("redisConfig: %v", err)
	}
	if cfg.SentinelUsername != "watcher" || cfg.SentinelPassword != "s3cret" || len(cfg.SentinelAddrs) != 2 || cfg.MasterName != "m" {
		t.Errorf("config = user %q password %q sentinels %v master %q", cfg.SentinelUsername, cfg.SentinelPassword, cfg.SentinelAddrs, cfg.MasterName)
	}
	t.Setenv(RedisSentinelPasswordEnv, "from-env")
	b, _ = parse("--redis-sentinel", "127.0.0.1:26379", "--redis-master", "m", "--redis-sentinel-username", "watcher")
	if cfg, err := b.redisConfig(); err != nil || cfg.SentinelPassword != "from-env" {
		t.Errorf("password from $%s: %q, %v", RedisSentinelPasswordEnv, cfg.SentinelPassword, err)
	}
	t.Setenv(RedisSentinelPasswordEnv, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis-sentinel", "127.0.0.1:26379", "--redis-master", "m", "--redis-sentinel-username", "watcher"}, "--redis-sentinel-username watcher: the password is missing"},
		{[]string{"--redis-sentinel-username", "watcher"}, "they need --redis-sentinel"},
		{[]string{"--redis-sentinel", "127.0.0.1:26379", "--redis-master", "m", "--redis-sentinel-password-file", filepath.Join(dir, "none")}, "--redis-sentinel-password-file: open"},
	} {
		b, _ := parse(c.args...)
		if _, err := b.redisConfig(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
