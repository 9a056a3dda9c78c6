package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/testcerts"
)

const securityJobs = `election:
  ttl: 2s
  shutdown_timeout: 5s
jobs:
  - name: tick
    schedule: "* * * * * *"
    builtin: log
`

// nodeEnv is the environment of a node under test: the test's, without
// the variables that carry credentials, plus extra.
func nodeEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CONSUL_HTTP_TOKEN") || strings.HasPrefix(kv, cli.EtcdPasswordEnv+"=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// leadsThenStops starts a node with args and env, waits for it to lead,
// then stops it with SIGTERM and expects exit status 0.
func leadsThenStops(t *testing.T, env []string, args ...string) {
	t.Helper()
	n := startProcEnv(t, "n1 | ", env, append([]string{"node", "--id", "n1", "--log-format", "json"}, args...)...)
	ev, _ := n.waitFor(0, 30*time.Second, "leadership", isAcquired)
	t.Logf("led %v after start, token %d", ev.at.Sub(n.start).Round(time.Millisecond), ev.token)
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-n.exited
	if n.err != nil {
		t.Errorf("exit after SIGTERM: %v, want 0", n.err)
	}
}

// failsAtStart runs a node with args and env and expects it to exit with
// status 1 within bound, printing exactly one line that contains every
// string of want.
func failsAtStart(t *testing.T, bound time.Duration, env []string, want []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, demoBinary(t), append([]string{"node", "--id", "n1", "--http", ""}, args...)...)
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v after %v, want status 1; stderr:\n%s", err, took, stderr.String())
	}
	if took > bound {
		t.Errorf("exited after %v, want within %v", took.Round(time.Millisecond), bound)
	}
	out := stderr.String()
	t.Logf("exit 1 after %v; stderr: %s", took.Round(time.Millisecond), out)
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Errorf("stderr has %d lines, want one:\n%s", strings.Count(out, "\n"), out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("stderr does not contain %q", w)
		}
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout: %q, want nothing", stdout.String())
	}
}

// TestNode_EtcdTLSAndAuth: `demo node` against an etcd that requires
// client certificates and has authentication on, logging in as a user
// whose role covers only the election's two prefixes. With the right
// flags it leads; with a wrong password, no client certificate, or an
// election outside the role it exits 1 at once with one line naming etcd
// and the problem.
func TestNode_EtcdTLSAndAuth(t *testing.T) {
	certs := testcerts.New(t, "etcd", "node")
	srv := etcdtest.StartWith(t, etcdtest.Options{
		TLS: &etcdtest.TLS{
			CertFile: certs.Server.CertFile, KeyFile: certs.Server.KeyFile, CAFile: certs.CA.CertFile,
			ClientCertAuth: true, AdminCertFile: certs.Client.CertFile, AdminKeyFile: certs.Client.KeyFile,
		},
		RootPassword: "root-secret",
	})
	tc, err := certs.CA.ClientTLS(certs.Client)
	if err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, TLS: tc, Username: "root", Password: "root-secret",
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	name := fmt.Sprintf("sec_%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(root.RoleAdd(ctx, "baton-demo"))
	for _, p := range []string{cli.EtcdPrefix(name) + "/", cli.EtcdPrefix(name) + "-ledger/"} {
		must(root.RoleGrantPermission(ctx, "baton-demo", p, clientv3.GetPrefixRangeEnd(p), clientv3.PermissionType(clientv3.PermReadWrite)))
	}
	must(root.UserAdd(ctx, "baton", "baton-secret"))
	must(root.UserGrantRole(ctx, "baton", "baton-demo"))

	dir := t.TempDir()
	pwFile := filepath.Join(dir, "password")
	badFile := filepath.Join(dir, "wrong")
	if err := os.WriteFile(pwFile, []byte("baton-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badFile, []byte("not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, "jobs.yaml", securityJobs)
	tlsFlags := []string{"--backend", "etcd", "--endpoints", srv.Endpoint(), "--etcd-cacert", certs.CA.CertFile,
		"--etcd-cert", certs.Client.CertFile, "--etcd-key", certs.Client.KeyFile, "--config", cfg}
	flags := func(extra ...string) []string { return append(append([]string(nil), tlsFlags...), extra...) }

	t.Run("RightFlags", func(t *testing.T) {
		leadsThenStops(t, nodeEnv(), flags("--election", name, "--etcd-user", "baton", "--etcd-password-file", pwFile)...)
	})
	t.Run("PasswordFromEnv", func(t *testing.T) {
		leadsThenStops(t, nodeEnv(cli.EtcdPasswordEnv+"=baton-secret"), flags("--election", name, "--etcd-user", "baton")...)
	})
	t.Run("WrongPassword", func(t *testing.T) {
		failsAtStart(t, 5*time.Second, nodeEnv(), []string{"etcd " + srv.Endpoint(), `log in as user "baton"`, "authentication failed"},
			flags("--election", name, "--etcd-user", "baton", "--etcd-password-file", badFile)...)
	})
	t.Run("NoClientCertificate", func(t *testing.T) {
		failsAtStart(t, 10*time.Second, nodeEnv(), []string{"etcd", srv.Endpoint(), "TLS"},
			"--backend", "etcd", "--endpoints", srv.Endpoint(), "--etcd-cacert", certs.CA.CertFile, "--config", cfg,
			"--election", name, "--etcd-user", "baton", "--etcd-password-file", pwFile)
	})
	t.Run("ElectionOutsideRole", func(t *testing.T) {
		failsAtStart(t, 5*time.Second, nodeEnv(), []string{"etcd prefix /baton/elections/other", "permission denied", `user "baton"`},
			flags("--election", "other", "--etcd-user", "baton", "--etcd-password-file", pwFile)...)
	})
	t.Run("MissingPassword", func(t *testing.T) {
		failsAtStart(t, 5*time.Second, nodeEnv(), []string{"--etcd-user baton", cli.EtcdPasswordEnv},
			flags("--election", name, "--etcd-user", "baton")...)
	})
}

// TestNode_ConsulACL: `demo node` against a Consul agent with ACLs on
// (default deny), with a token whose policy is the least the election
// needs. With the token from a file or CONSUL_HTTP_TOKEN it leads; with an
// unknown token or none it exits 1 at once with Consul's reason.
func TestNode_ConsulACL(t *testing.T) {
	a := consultest.StartTWith(t, consultest.Options{ACLManagementToken: "0b7f3c55-8f0e-4c55-a1de-5c2b6f1e9d01"})
	mgmt, err := a.ClientWithToken("", a.ManagementToken)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sec_%d", time.Now().UnixNano())
	pol, _, err := mgmt.ACL().PolicyCreate(&api.ACLPolicy{Name: "baton-demo", Rules: fmt.Sprintf(
		`key_prefix %q { policy = "write" }
session %q { policy = "write" }`, cli.ConsulKey(name), consultest.NodeName)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := mgmt.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: pol.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(tok.SecretID+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badFile := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(badFile, []byte("00000000-1111-2222-3333-444444444444\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--backend", "consul", "--consul-addr", a.HTTPAddr, "--election", name, "--config", writeFile(t, "jobs.yaml", strings.Replace(securityJobs, "ttl: 2s", "ttl: 10s", 1))}
	with := func(extra ...string) []string { return append(append([]string(nil), flags...), extra...) }

	t.Run("TokenFile", func(t *testing.T) {
		leadsThenStops(t, nodeEnv(), with("--consul-token-file", tokFile)...)
	})
	t.Run("TokenFromEnv", func(t *testing.T) {
		leadsThenStops(t, nodeEnv("CONSUL_HTTP_TOKEN="+tok.SecretID), flags...)
	})
	t.Run("UnknownToken", func(t *testing.T) {
		failsAtStart(t, 5*time.Second, nodeEnv(), []string{"consul key " + cli.ConsulKey(name), "403 (ACL not found)"}, with("--consul-token-file", badFile)...)
	})
	t.Run("NoToken", func(t *testing.T) {
		failsAtStart(t, 5*time.Second, nodeEnv(), []string{"consul key " + cli.ConsulKey(name), "anonymous token lacks permission 'key:read'"}, flags...)
	})
}

// TestNode_ConsulTLS: `demo node` reaches an agent's HTTPS listener that
// requires client certificates (verify_incoming), with ACLs on, using
// --consul-cacert, --consul-cert, --consul-key and --consul-token-file;
// without the client certificate it exits 1 at once with the TLS error.
func TestNode_ConsulTLS(t *testing.T) {
	certs := testcerts.New(t, "consul", "node")
	a := consultest.StartTWith(t, consultest.Options{
		ACLManagementToken: "3c1d9a77-2b4e-4f0a-8e61-7d2c5b9a0f13",
		TLS:                &consultest.TLS{CertFile: certs.Server.CertFile, KeyFile: certs.Server.KeyFile, CAFile: certs.CA.CertFile, VerifyIncoming: true},
	})
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(a.ManagementToken), 0o600); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sec_%d", time.Now().UnixNano())
	flags := []string{"--backend", "consul", "--consul-addr", a.HTTPSAddr, "--consul-cacert", certs.CA.CertFile,
		"--consul-token-file", tokFile, "--election", name, "--config", writeFile(t, "jobs.yaml", strings.Replace(securityJobs, "ttl: 2s", "ttl: 10s", 1))}
	with := func(extra ...string) []string { return append(append([]string(nil), flags...), extra...) }

	t.Run("ClientCertificate", func(t *testing.T) {
		leadsThenStops(t, nodeEnv(), with("--consul-cert", certs.Client.CertFile, "--consul-key", certs.Client.KeyFile)...)
	})
	t.Run("NoClientCertificate", func(t *testing.T) {
		failsAtStart(t, 5*time.Second, nodeEnv(), []string{"consul key " + cli.ConsulKey(name), "https://" + a.HTTPSAddr, "tls: "}, flags...)
	})
}
