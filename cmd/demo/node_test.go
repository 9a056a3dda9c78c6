package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/hashicorp/consul/api"
	_ "github.com/jackc/pgx/v5/stdlib"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/internal/certtest"
	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/etcdtest"
)

// TestNode_Backends runs two `demo node` processes on one election of each
// backend: the first leads and runs the jobs, the second reports it as the
// leader in /status, takes over when the first gets SIGTERM, and both exit
// 0.
func TestNode_Backends(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and servers")
	}
	t.Run("etcd", func(t *testing.T) {
		srv := etcdtest.Start(t)
		testTwoNodes(t, "2s", "--backend", "etcd", "--endpoints", srv.Endpoint())
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := envtest.Getenv("BATON_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		requireDB(t, "pgx", dsn)
		testTwoNodes(t, "2s", "--backend", "postgres", "--dsn", dsn, "--table", "baton_demo_test")
	})
	t.Run("mysql", func(t *testing.T) {
		dsn := envtest.Getenv("BATON_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test?parseTime=true")
		requireDB(t, "mysql", dsn)
		testTwoNodes(t, "2s", "--backend", "mysql", "--dsn", dsn, "--table", "baton_demo_test")
	})
	t.Run("consul", func(t *testing.T) {
		a := consultest.StartT(t)
		testTwoNodes(t, "10s", "--backend", "consul", "--consul-addr", a.HTTPAddr)
	})
}

func requireDB(t *testing.T, driver, dsn string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
	}
	if err != nil {
		envtest.Unavailable(t, "%s %s: %v", driver, dsn, err)
	}
}

func nodeStatus(t *testing.T, url string) httpapi.Status {
	t.Helper()
	resp, err := http.Get(url + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st httpapi.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func testTwoNodes(t *testing.T, ttl string, backend ...string) {
	cfg := writeFile(t, "jobs.yaml", fmt.Sprintf(`election:
  ttl: %s
  poll_interval: 200ms
  shutdown_timeout: 10s
jobs:
  - name: tick
    schedule: "* * * * * *"
    builtin: log
  - name: env
    schedule: "* * * * * *"
    command: echo "$BATON_JOB $BATON_TOKEN"
`, ttl))
	name := fmt.Sprintf("nodetest_%d", time.Now().UnixNano())
	node := func(id string) *cluster {
		args := append([]string{"node"}, backend...)
		args = append(args, "--election", name, "--id", id, "--config", cfg, "--log-format", "json")
		return startProc(t, id+" | ", args...)
	}
	a := node("n1")
	aStarted, _ := a.waitFor(0, 30*time.Second, "n1 started", func(ev event) bool { return ev.msg == "node started" })
	acq, _ := a.waitFor(0, 30*time.Second, "n1 leading", isAcquired)
	a.waitFor(0, 10*time.Second, "a run on n1", func(ev event) bool { return ev.msg == "run ended" && ev.job == "env" && ev.result == "ok" })
	a.waitFor(0, 10*time.Second, "the command's output", func(ev event) bool {
		return ev.msg == "output" && ev.job == "env" && ev.token == acq.token
	})

	b := node("n2")
	bStarted, _ := b.waitFor(0, 30*time.Second, "n2 started", func(ev event) bool { return ev.msg == "node started" })
	st := nodeStatus(t, bStarted.http)
	if st.Leading || st.Leader == nil || st.Leader.Identity.ID != "n1" || st.Leader.Token != acq.token || !st.Healthy {
		t.Errorf("n2 /status: leading %v, leader %+v, healthy %v; want n1 with token %d", st.Leading, st.Leader, st.Healthy, acq.token)
	}
	st = nodeStatus(t, aStarted.http)
	if !st.Leading || st.Term == nil || st.Term.Token != acq.token || len(st.Jobs) != 2 || st.Jobs[0].LastRun == nil {
		t.Errorf("n1 /status: %+v", st)
	}

	mark := b.len()
	termAt := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	next, _ := b.waitFor(mark, 15*time.Second, "n2 leading after SIGTERM of n1", isAcquired)
	if next.token <= acq.token {
		t.Errorf("n2's token %d not above n1's %d", next.token, acq.token)
	}
	t.Logf("n2 leads %v after SIGTERM to n1 (token %d -> %d)", next.time.Sub(termAt).Round(time.Millisecond), acq.token, next.token)
	<-a.exited
	if a.err != nil {
		t.Errorf("n1 exit after SIGTERM: %v, want 0", a.err)
	}
	b.waitFor(mark, 10*time.Second, "a run on n2", func(ev event) bool { return ev.msg == "run ended" && ev.job == "tick" })
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-b.exited
	if b.err != nil {
		t.Errorf("n2 exit after SIGINT: %v, want 0", b.err)
	}
}

// longJobs starts a one-minute run every second, and lets a drain wait a
// minute for it.
const longJobs = `election:
  ttl: 2s
  shutdown_timeout: 1m
jobs:
  - name: long
    schedule: "* * * * * *"
    builtin: sleep
    duration: 1m
`

// TestNode_SecondSignalExitsAtOnce: SIGTERM starts a drain that would wait
// for a long job; a second SIGTERM exits at once with status 2.
func TestNode_SecondSignalExitsAtOnce(t *testing.T) {
	srv := etcdtest.Start(t)
	cfg := writeFile(t, "jobs.yaml", longJobs)
	n := startProc(t, "n1 | ", "node", "--endpoints", srv.Endpoint(), "--election", "second", "--id", "n1", "--config", cfg, "--log-format", "json")
	n.waitFor(0, 30*time.Second, "a long run", func(ev event) bool { return ev.msg == "run started" && ev.job == "long" })
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.waitFor(0, 10*time.Second, "the drain", func(ev event) bool { return ev.msg == "draining" })
	select {
	case <-n.exited:
		t.Fatalf("exited on the first SIGTERM while a 1 m job runs (%v)", n.err)
	case <-time.After(300 * time.Millisecond):
	}
	at := time.Now()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, n.exited, 5*time.Second, "still running 5 s after the second SIGTERM")
	var ee *exec.ExitError
	if !errors.As(n.err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("exit after the second SIGTERM: %v, want status 2", n.err)
	}
	t.Logf("exited %v after the second SIGTERM", time.Since(at).Round(time.Millisecond))
}

// TestCluster_SecondSignal: a second Ctrl-C makes the cluster exit at once
// with status 2 and kill its nodes.
func TestCluster_SecondSignal(t *testing.T) {
	cfg := writeFile(t, "jobs.yaml", longJobs)
	c := startCluster(t, "--nodes", "2", "--config", cfg, "--log-format", "json")
	c.waitFor(0, 30*time.Second, "a long run", func(ev event) bool { return ev.msg == "run started" && ev.job == "long" })
	pids := []int{c.pidOf("node-1"), c.pidOf("node-2")}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	c.waitFor(0, 10*time.Second, "the drain", func(ev event) bool { return ev.msg == "draining" })
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	waitExit(t, c.exited, 10*time.Second, "cluster still running 10 s after the second SIGINT")
	var ee *exec.ExitError
	if !errors.As(c.err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("cluster exit: %v, want status 2", c.err)
	}
	waitUntil(t, "the nodes gone", func() bool {
		for _, pid := range pids {
			if alive(pid) {
				return false
			}
		}
		return true
	})
}

// alive reports whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || !strings.Contains(string(b), ") Z ")
}

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
	certs := certtest.New(t, "etcd", "node")
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
	certs := certtest.New(t, "consul", "node")
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
