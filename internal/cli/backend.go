package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backends/etcd"
)

// BackendFlags are the flags naming a backend and an election, shared by
// every command that opens one (`demo node`, `demo history`). Register
// them on a FlagSet, parse, then call Open.
type BackendFlags struct {
	// Kind is the backend: etcd, postgres, mysql, consul, redis or kube.
	Kind string
	// Election is the election's name.
	Election string
	// RawName makes Election the key prefix itself on etcd and on Consul,
	// as `etcdctl lock NAME` and `consul lock NAME` take their name, so
	// that `baton lock NAME` and those exclude each other. Without it the
	// prefix is EtcdPrefix(Election) and the key ConsulKey(Election).
	RawName bool

	endpoints  string
	dsn        string
	table      string
	consulAddr string

	// etcd TLS and authentication.
	etcdCACert, etcdCert, etcdKey string
	etcdUser, etcdPasswordFile    string
	// Consul ACL token and TLS.
	consulTokenFile                     string
	consulCACert, consulCert, consulKey string
	// Redis address, ACL user, password file and TLS.
	redisAddr, redisUser, redisPasswordFile string
	redisTLS                                bool
	redisCACert, redisCert, redisKey        string
	// Redis Sentinel or Cluster, and WAIT.
	redisSentinel, redisMaster, redisCluster string
	redisWaitReplicas                        int
	// Sentinel ACL user and password file.
	redisSentinelUser, redisSentinelPasswordFile string
	// Kubernetes API server, token, CA and namespace.
	kubeServer, kubeTokenFile, kubeCACert, kubeNamespace string
	kubeInsecureHTTP                                     bool
	kubeconfig, kubeContext                              string
	kubeInsecureSkipVerify                               bool
	kubeTokenFrom                                        string // where openKube took the token from, for Explain
	kubeContextUsed                                      string // the kubeconfig context openKube used, for Explain
}

// DefaultRedisAddr is --redis-addr when neither it nor --redis-sentinel
// nor --redis-cluster is given.
const DefaultRedisAddr = "127.0.0.1:6379"

// RedisPasswordEnv names the environment variable holding the Redis
// password when --redis-password-file is not given.
const RedisPasswordEnv = "BATON_REDIS_PASSWORD"

// RedisSentinelPasswordEnv names the environment variable holding the
// Sentinels' password when --redis-sentinel-password-file is not given.
const RedisSentinelPasswordEnv = "BATON_REDIS_SENTINEL_PASSWORD"

// EtcdPasswordEnv names the environment variable holding the etcd
// password when --etcd-password-file is not given. Passwords are never
// taken from the command line, where `ps` shows them.
const EtcdPasswordEnv = "BATON_ETCD_PASSWORD"

// Register defines the flags on fs. It does not parse.
func (b *BackendFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&b.Kind, "backend", "etcd", "backend: etcd, postgres, mysql, consul, redis or kube")
	fs.StringVar(&b.endpoints, "endpoints", "http://127.0.0.1:2379", "etcd: comma-separated client URLs")
	fs.StringVar(&b.dsn, "dsn", "", "postgres: URL such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable;\nmysql: DSN such as root@tcp(127.0.0.1:3306)/test")
	fs.StringVar(&b.table, "table", "baton_lease", "postgres, mysql: lease table (created if missing)")
	fs.StringVar(&b.consulAddr, "consul-addr", "127.0.0.1:8500", "consul: agent HTTP address")
	fs.StringVar(&b.Election, "election", "demo", "election name")

	fs.StringVar(&b.etcdCACert, "etcd-cacert", "", "etcd: CA certificate (PEM) that signed the server's certificate, for https://\nendpoints (default: the system roots)")
	fs.StringVar(&b.etcdCert, "etcd-cert", "", "etcd: client certificate (PEM), for servers with --client-cert-auth")
	fs.StringVar(&b.etcdKey, "etcd-key", "", "etcd: key (PEM) of --etcd-cert")
	fs.StringVar(&b.etcdUser, "etcd-user", "", "etcd: user name, for servers with auth enabled; the password comes from\n--etcd-password-file or $"+EtcdPasswordEnv)
	fs.StringVar(&b.etcdPasswordFile, "etcd-password-file", "", "etcd: file holding the password of --etcd-user (trailing newline ignored)")
	fs.StringVar(&b.consulTokenFile, "consul-token-file", "", "consul: file holding the ACL token (default: $CONSUL_HTTP_TOKEN or\n$CONSUL_HTTP_TOKEN_FILE, as the consul CLI)")
	fs.StringVar(&b.consulCACert, "consul-cacert", "", "consul: CA certificate (PEM) of the agent's HTTPS listener; with it the\nagent is reached over https://")
	fs.StringVar(&b.consulCert, "consul-cert", "", "consul: client certificate (PEM), for agents with verify_incoming")
	fs.StringVar(&b.consulKey, "consul-key", "", "consul: key (PEM) of --consul-cert")
	fs.StringVar(&b.redisAddr, "redis-addr", "", "redis: server host:port (default "+DefaultRedisAddr+" unless --redis-sentinel or\n--redis-cluster is given)")
	fs.StringVar(&b.redisSentinel, "redis-sentinel", "", "redis: comma-separated Sentinel host:port list, instead of --redis-addr; with\n--redis-master")
	fs.StringVar(&b.redisMaster, "redis-master", "", "redis: name of the primary the Sentinels of --redis-sentinel monitor")
	fs.StringVar(&b.redisSentinelUser, "redis-sentinel-username", "", "redis: ACL user name on the Sentinels, if they require one (the password comes\nfrom --redis-sentinel-password-file or $"+RedisSentinelPasswordEnv+")")
	fs.StringVar(&b.redisSentinelPasswordFile, "redis-sentinel-password-file", "", "redis: file holding the Sentinels' password (trailing newline ignored);\ndefault $"+RedisSentinelPasswordEnv)
	fs.StringVar(&b.redisCluster, "redis-cluster", "", "redis: comma-separated host:port list of Redis Cluster nodes, instead of\n--redis-addr")
	fs.IntVar(&b.redisWaitReplicas, "redis-wait-replicas", 0, "redis: replicas that must acknowledge every write (WAIT), or the write fails;\n0 replicates asynchronously (a failover may lose the lease and claims)")
	fs.StringVar(&b.redisUser, "redis-username", "", "redis: ACL user name (the password comes from --redis-password-file or\n$"+RedisPasswordEnv+")")
	fs.StringVar(&b.redisPasswordFile, "redis-password-file", "", "redis: file holding the password (trailing newline ignored); default $"+RedisPasswordEnv)
	fs.BoolVar(&b.redisTLS, "redis-tls", false, "redis: connect with TLS (implied by --redis-cacert or --redis-cert)")
	fs.StringVar(&b.redisCACert, "redis-cacert", "", "redis: CA certificate (PEM) that signed the server's certificate (default: the\nsystem roots)")
	fs.StringVar(&b.redisCert, "redis-cert", "", "redis: client certificate (PEM), for servers with tls-auth-clients")
	fs.StringVar(&b.redisKey, "redis-key", "", "redis: key (PEM) of --redis-cert")
	fs.StringVar(&b.kubeServer, "kube-server", "", "kube: API server URL (default in a pod: its service account's; else the kubeconfig's)")
	fs.StringVar(&b.kubeTokenFile, "kube-token-file", "", "kube: file holding a bearer token, read again every minute (default in a pod:\nits service account's)")
	fs.StringVar(&b.kubeCACert, "kube-cacert", "", "kube: CA certificate (PEM) of the API server (default in a pod: its service\naccount's; else the system roots)")
	fs.BoolVar(&b.kubeInsecureHTTP, "kube-insecure-http", false, "kube: allow an http:// --kube-server, which sends the bearer token in clear\n(only behind a local proxy such as kubectl proxy)")
	fs.StringVar(&b.kubeconfig, "kubeconfig", "", "kube: kubeconfig file(s), as kubectl's --kubeconfig (default outside a pod\nwithout --kube-server: $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&b.kubeContext, "kube-context", "", "kube: the kubeconfig's context to use (default: its current-context)")
	fs.BoolVar(&b.kubeInsecureSkipVerify, "kube-insecure-skip-tls-verify", false, "kube: accept a kubeconfig cluster with insecure-skip-tls-verify: true\n(refused without it: anyone on the path could take the credentials)")
	fs.StringVar(&b.kubeNamespace, "kube-namespace", "", "kube: namespace of the election's Lease, which is named after the election\n(default: the kubeconfig context's; in a pod: its own; else default)")
}

// readSecret returns the contents of the file at path without trailing
// line breaks.
func readSecret(flagName, path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flagName, err)
	}
	v := strings.TrimRight(string(raw), "\r\n")
	if v == "" {
		return "", fmt.Errorf("--%s: %s is empty", flagName, path)
	}
	return v, nil
}

// etcdConfig is the etcd client configuration the flags describe.
func (b *BackendFlags) etcdConfig() (clientv3.Config, error) {
	cfg := clientv3.Config{
		Endpoints:            strings.Split(b.endpoints, ","),
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(), // the etcd client's own logger stays silent
	}
	if (b.etcdCert == "") != (b.etcdKey == "") {
		return cfg, errors.New("--etcd-cert and --etcd-key: give both or neither")
	}
	if b.etcdCACert != "" || b.etcdCert != "" {
		info := transport.TLSInfo{TrustedCAFile: b.etcdCACert, CertFile: b.etcdCert, KeyFile: b.etcdKey}
		tc, err := info.ClientConfig()
		if err != nil {
			return cfg, fmt.Errorf("etcd TLS (--etcd-cacert, --etcd-cert, --etcd-key): %w", err)
		}
		cfg.TLS = tc
		for i, ep := range cfg.Endpoints {
			switch {
			case strings.HasPrefix(ep, "http://"):
				// The etcd client would drop TLS for it without a word.
				return cfg, fmt.Errorf("--endpoints %s: plain http:// with TLS flags; use https://", ep)
			case !strings.Contains(ep, "://"):
				cfg.Endpoints[i] = "https://" + ep
			}
		}
	}
	switch {
	case b.etcdUser != "" && b.etcdPasswordFile != "":
		pw, err := readSecret("etcd-password-file", b.etcdPasswordFile)
		if err != nil {
			return cfg, err
		}
		cfg.Username, cfg.Password = b.etcdUser, pw
	case b.etcdUser != "":
		pw := os.Getenv(EtcdPasswordEnv)
		if pw == "" {
			return cfg, fmt.Errorf("--etcd-user %s: the password is missing: give --etcd-password-file or set %s", b.etcdUser, EtcdPasswordEnv)
		}
		cfg.Username, cfg.Password = b.etcdUser, pw
	case b.etcdPasswordFile != "":
		return cfg, errors.New("--etcd-password-file: needs --etcd-user")
	}
	return cfg, nil
}

// openEtcd connects to etcd. With a user name, clientv3.New logs in before
// it returns: a wrong password fails here, and so does a TLS problem, but
// only as a timeout; connecting again without the user name lets the
// backend's Check say what is wrong with the connection.
func (b *BackendFlags) openEtcd(ctx context.Context, cfg clientv3.Config) (*clientv3.Client, error) {
	eps := strings.Join(cfg.Endpoints, ",")
	cli, err := clientv3.New(cfg)
	switch {
	case err == nil:
		return cli, nil
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return nil, fmt.Errorf("etcd %s: log in as user %q: %w", eps, cfg.Username, err)
	case cfg.Username == "" || !errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("etcd %s: %w", eps, err)
	}
	anon := cfg
	anon.Username, anon.Password = "", ""
	if probe, perr := clientv3.New(anon); perr == nil {
		defer probe.Close()
		if be, berr := etcd.New(etcd.Config{Client: probe, Prefix: b.etcdPrefix()}); berr == nil {
			cctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
			cerr := be.Check(cctx)
			cancel()
			if cerr != nil && strings.Contains(cerr.Error(), "cannot connect") {
				return nil, fmt.Errorf("etcd: log in as user %q: %w", cfg.Username, cerr)
			}
		}
	}
	return nil, fmt.Errorf("etcd %s: log in as user %q: no answer within %v: %w", eps, cfg.Username, cfg.DialTimeout, err)
}

// consulConfig is the Consul client configuration the flags describe, on
// top of the consul CLI's environment variables (CONSUL_HTTP_TOKEN,
// CONSUL_HTTP_TOKEN_FILE, CONSUL_CACERT, ...).
func (b *BackendFlags) consulConfig() (*api.Config, error) {
	cc := api.DefaultConfig()
	cc.Address = b.consulAddr
	if b.consulTokenFile != "" {
		tok, err := readSecret("consul-token-file", b.consulTokenFile)
		if err != nil {
			return nil, err
		}
		cc.Token, cc.TokenFile = tok, ""
	}
	if (b.consulCert == "") != (b.consulKey == "") {
		return nil, errors.New("--consul-cert and --consul-key: give both or neither")
	}
	if b.consulCACert != "" || b.consulCert != "" {
		cc.Scheme = "https"
		cc.TLSConfig.CAFile = b.consulCACert
		cc.TLSConfig.CertFile, cc.TLSConfig.KeyFile = b.consulCert, b.consulKey
	}
	return cc, nil
}

// EtcdPrefix is the key prefix of an election on etcd: the name itself
// when it starts with a slash, else /baton/elections/NAME.
func EtcdPrefix(name string) string {
	if strings.HasPrefix(name, "/") {
		return strings.TrimSuffix(name, "/")
	}
	return "/baton/elections/" + name
}

func (b *BackendFlags) etcdPrefix() string {
	if b.RawName {
		return b.Election
	}
	return EtcdPrefix(b.Election)
}

func (b *BackendFlags) consulLockKey() string {
	if b.RawName {
		return consul.LockKey(b.Election)
	}
	return ConsulKey(b.Election)
}

// ConsulKey is the lock key of an election on Consul: the key `consul lock
// service/baton/NAME` locks, so that the two exclude each other.
func ConsulKey(name string) string { return consul.LockKey("service/baton/" + name) }
