package etcd_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/certtest"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/etcdtest"
)

const rootPassword = "root-secret"

// creds is how a test client authenticates: the CA it trusts, the client
// certificate it presents (zero: none) and a user name and password.
type creds struct {
	ca         *certtest.CA
	cert       certtest.Pair
	user, pass string
}

// secureClient returns a client of srv with c, or clientv3.New's error
// (with a user name, New authenticates before it returns).
// secureClient makes a client with creds c. With a user and password,
// clientv3.New logs in within dial: a bcrypt check of the password in this
// race-instrumented process, which takes seconds on a loaded machine.
func secureClient(t *testing.T, srv *etcdtest.Server, c creds, dial time.Duration) (*clientv3.Client, error) {
	t.Helper()
	tc, err := c.ca.ClientTLS(c.cert)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{srv.Endpoint()},
		TLS:         tc,
		Username:    c.user,
		Password:    c.pass,
		DialTimeout: dial,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cli.Close() })
	return cli, nil
}

func mustSecureClient(t *testing.T, srv *etcdtest.Server, c creds) *clientv3.Client {
	t.Helper()
	cli, err := secureClient(t, srv, c, 30*time.Second)
	if err != nil {
		t.Fatalf("client as %q: %v", c.user, err)
	}
	return cli
}

// grantElection gives user, created with password pass (none if empty:
// a user for client-certificate authentication), a role with read and
// write permission on exactly the two prefixes an election uses: PREFIX/
// (the candidates' keys) and PREFIX-ledger/ (the tick ledger).
func grantElection(t *testing.T, root *clientv3.Client, user, pass, pfx string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	role := "baton-" + strings.ReplaceAll(strings.Trim(pfx, "/"), "/", "-")
	if _, err := root.RoleAdd(ctx, role); err != nil {
		t.Fatalf("add role: %v", err)
	}
	for _, p := range []string{pfx + "/", pfx + "-ledger/"} {
		if _, err := root.RoleGrantPermission(ctx, role, p, clientv3.GetPrefixRangeEnd(p), clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
			t.Fatalf("grant %s: %v", p, err)
		}
	}
	if _, err := root.UserAddWithOptions(ctx, user, pass, &clientv3.UserAddOptions{NoPassword: pass == ""}); err != nil {
		t.Fatalf("add user %s: %v", user, err)
	}
	if _, err := root.UserGrantRole(ctx, user, role); err != nil {
		t.Fatalf("grant role: %v", err)
	}
}

// checkFails runs Check on a backend of cli for pfx and returns its error,
// failing t if Check succeeds or takes longer than bound (a fast, clear
// failure at start, not a wait for a timeout).
func checkFails(t *testing.T, cli *clientv3.Client, pfx string, bound time.Duration) error {
	t.Helper()
	return backendtest.CheckFails(t, newBackend(t, cli, pfx, 2*time.Second), bound)
}

func wantIn(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

// TestSecurity_ClientCertificates runs an etcd that requires client
// certificates signed by its CA and has authentication enabled, so the
// certificate's common name is the user: "baton", a user without a
// password whose role covers one election's two prefixes only.
func TestSecurity_ClientCertificates(t *testing.T) {
	certs := certtest.New(t, "etcd", "baton")
	srv := etcdtest.StartWith(t, etcdtest.Options{
		TLS: &etcdtest.TLS{
			CertFile: certs.Server.CertFile, KeyFile: certs.Server.KeyFile,
			CAFile: certs.CA.CertFile, ClientCertAuth: true,
			AdminCertFile: certs.Client.CertFile, AdminKeyFile: certs.Client.KeyFile,
		},
		RootPassword: rootPassword,
	})
	root := mustSecureClient(t, srv, creds{ca: certs.CA, cert: certs.Client, user: "root", pass: rootPassword})
	pfx := prefix(t)
	grantElection(t, root, "baton", "", pfx)
	good := creds{ca: certs.CA, cert: certs.Client}

	t.Run("RightCertificate", func(t *testing.T) {
		a := newBackend(t, mustSecureClient(t, srv, good), pfx, 2*time.Second)
		b := newBackend(t, mustSecureClient(t, srv, good), pfx, 2*time.Second)
		backendtest.RunSmoke(t, a, b, 10*time.Second)
	})
	t.Run("RoleDoesNotCoverPrefix", func(t *testing.T) {
		err := checkFails(t, mustSecureClient(t, srv, good), prefix(t), time.Second)
		if !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("err = %v, want ErrPermissionDenied", err)
		}
		wantIn(t, err, "permission denied", "client certificate's common name", "-ledger/")
	})
	t.Run("NoCertificate", func(t *testing.T) {
		err := checkFails(t, mustSecureClient(t, srv, creds{ca: certs.CA}), pfx, 2*time.Second)
		// The server's "certificate required" alert, or (TLS 1.3, the
		// alert lost when the server closes first) Check's explanation.
		if msg := err.Error(); !strings.Contains(msg, "certificate required") && !strings.Contains(msg, "rejects the client certificate") {
			t.Errorf("error %q does not say the certificate was refused", msg)
		}
		wantIn(t, err, srv.Endpoint(), "TLS handshake")
	})
	t.Run("CertificateOfAnotherCA", func(t *testing.T) {
		other := certtest.New(t, "other", "baton")
		err := checkFails(t, mustSecureClient(t, srv, creds{ca: certs.CA, cert: other.Client}), pfx, 2*time.Second)
		// Go's TLS client sends no certificate when none is signed by a
		// CA the server lists ("certificate required"); the server
		// refuses one it cannot verify ("unknown certificate
		// authority"); with TLS 1.3 the alert can also be lost when the
		// server closes first (Check's message then says so).
		if msg := err.Error(); !strings.Contains(msg, "certificate required") && !strings.Contains(msg, "unknown certificate authority") &&
			!strings.Contains(msg, "rejects the client certificate") {
			t.Errorf("error %q does not say the certificate was refused", msg)
		}
		wantIn(t, err, srv.Endpoint(), "TLS")
	})
	t.Run("ServerNotTrusted", func(t *testing.T) {
		other := certtest.New(t, "other", "baton")
		err := checkFails(t, mustSecureClient(t, srv, creds{ca: other.CA, cert: certs.Client}), pfx, 2*time.Second)
		wantIn(t, err, srv.Endpoint(), "TLS handshake failed", "x509: certificate signed by unknown authority")
	})
}

// startPasswordEtcd runs an etcd with TLS (server certificate only) and
// authentication enabled. It returns the server, the CA of its
// certificate, a client logged in as root, and a prefix that user
// "baton" (password "baton-secret") may use for an election
// (grantElection).
func startPasswordEtcd(t *testing.T) (srv *etcdtest.Server, ca *certtest.CA, root *clientv3.Client, pfx string) {
	t.Helper()
	certs := certtest.New(t, "etcd", "unused")
	srv = etcdtest.StartWith(t, etcdtest.Options{
		TLS:          &etcdtest.TLS{CertFile: certs.Server.CertFile, KeyFile: certs.Server.KeyFile, CAFile: certs.CA.CertFile},
		RootPassword: rootPassword,
	})
	root = mustSecureClient(t, srv, creds{ca: certs.CA, user: "root", pass: rootPassword})
	pfx = prefix(t)
	grantElection(t, root, "baton", "baton-secret", pfx)
	return srv, certs.CA, root, pfx
}

// TestSecurity_Password runs an etcd with TLS (server certificate only)
// and authentication enabled; clients log in with a user name and
// password. User "baton" has a role limited to one election's prefixes.
func TestSecurity_Password(t *testing.T) {
	srv, ca, root, pfx := startPasswordEtcd(t)
	good := creds{ca: ca, user: "baton", pass: "baton-secret"}

	t.Run("LeastPrivilegeUser", func(t *testing.T) {
		a := newBackend(t, mustSecureClient(t, srv, good), pfx, 2*time.Second)
		b := newBackend(t, mustSecureClient(t, srv, good), pfx, 2*time.Second)
		backendtest.RunSmoke(t, a, b, 10*time.Second)
	})
	t.Run("Root", func(t *testing.T) {
		rpfx := prefix(t)
		a := newBackend(t, root, rpfx, 2*time.Second)
		b := newBackend(t, mustSecureClient(t, srv, creds{ca: ca, user: "root", pass: rootPassword}), rpfx, 2*time.Second)
		backendtest.RunSmoke(t, a, b, 10*time.Second)
	})
	t.Run("WrongPassword", func(t *testing.T) {
		start := time.Now()
		cli, err := secureClient(t, srv, creds{ca: ca, user: "baton", pass: "wrong"}, 30*time.Second)
		if err == nil {
			// Not every client version authenticates in New: then the
			// first request, Check's, must fail the same way.
			err = checkFails(t, cli, pfx, 2*time.Second)
		}
		if !errors.Is(err, rpctypes.ErrAuthFailed) {
			t.Errorf("err = %v, want ErrAuthFailed", err)
		}
		// The server's answer, not a timeout: one bcrypt check, which in
		// this race-instrumented process on a loaded machine can take
		// several seconds. The bound only rules out retrying until a
		// deadline.
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("wrong password noticed after %v, want within 20 s", took)
		}
		t.Logf("wrong password: %v", err)
	})
	t.Run("NoCredentials", func(t *testing.T) {
		err := checkFails(t, mustSecureClient(t, srv, creds{ca: ca}), pfx, time.Second)
		if !errors.Is(err, rpctypes.ErrUserEmpty) {
			t.Errorf("err = %v, want ErrUserEmpty", err)
		}
		wantIn(t, err, "authentication enabled")
	})
	t.Run("RoleDoesNotCoverPrefix", func(t *testing.T) {
		err := checkFails(t, mustSecureClient(t, srv, good), prefix(t), time.Second)
		wantIn(t, err, "permission denied", `user "baton"`)
	})
	t.Run("LedgerPrefixMissing", func(t *testing.T) {
		// A role covering the election but not its ledger fails Check too:
		// the ledger is written at every tick.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lpfx := prefix(t)
		if _, err := root.RoleAdd(ctx, "no-ledger"); err != nil {
			t.Fatal(err)
		}
		if _, err := root.RoleGrantPermission(ctx, "no-ledger", lpfx+"/", clientv3.GetPrefixRangeEnd(lpfx+"/"), clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
			t.Fatal(err)
		}
		if _, err := root.UserAdd(ctx, "noledger", "pw-noledger"); err != nil {
			t.Fatal(err)
		}
		if _, err := root.UserGrantRole(ctx, "noledger", "no-ledger"); err != nil {
			t.Fatal(err)
		}
		err := checkFails(t, mustSecureClient(t, srv, creds{ca: ca, user: "noledger", pass: "pw-noledger"}), lpfx, time.Second)
		wantIn(t, err, "write probe", "permission denied", lpfx+"-ledger/")
	})
}

// lines collects log output for a test, safe for concurrent writes.
type lines struct{ envtest.Buffer }

func (l *lines) contains(s string) bool { return strings.Contains(l.String(), s) }

// passwordClient returns a plain-HTTP client of srv logging in as user.
// Its DialTimeout is long: clientv3.New authenticates within it, and
// TestSecurity_SlowPasswordCheck makes authentication slow on purpose.
func passwordClient(t *testing.T, srv *etcdtest.Server, user, pass string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{srv.Endpoint()},
		Username:    user,
		Password:    pass,
		DialTimeout: 30 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("client as %q: %v", user, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// timeAuthenticate returns how long one Authenticate as user takes srv: a
// bcrypt check of the password, then a raft entry.
func timeAuthenticate(t *testing.T, cli *clientv3.Client, user, pass string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := cli.Auth.Authenticate(ctx, user, pass); err != nil {
		t.Fatalf("Authenticate as %s: %v", user, err)
	}
	return time.Since(start)
}

// slowBcryptCost returns a bcrypt cost at which one password check takes
// this process (and so an embedded server in it, with or without the race
// detector) at least about want, from the time one check takes at etcd's
// default cost on a server of its own.
func slowBcryptCost(t *testing.T, want time.Duration) int {
	t.Helper()
	const defaultCost = 10
	srv, err := etcdtest.StartDirWith(t.TempDir(), etcdtest.Options{RootPassword: rootPassword})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cli := passwordClient(t, srv, "root", rootPassword)
	took := timeAuthenticate(t, cli, "root", rootPassword)
	cli.Close()
	cost := defaultCost
	for d := took; d < want && cost < 20; d *= 2 {
		cost++
	}
	t.Logf("one Authenticate at bcrypt cost %d takes %v here: using cost %d", defaultCost, took.Round(time.Millisecond), cost)
	return cost
}

// TestSecurity_SlowPasswordCheck runs an election of two password-
// authenticated candidates on a server where one password check takes
// longer than a renewal may take (what is left of the TTL after the
// renewal interval and the safety margin): the leader's term and the
// follower's campaign must both hold, renewal after renewal.
//
// The etcd client authenticates again, with the password, on every gRPC
// stream it opens (clientv3's stream interceptor), and LeaseKeepAlive is
// a stream: a renewal that opens one waits for the server to check the
// password (bcrypt) and write the new token through raft. Under the race
// detector a check at etcd's default cost takes about 0.6 s, more when
// several run at once, which is how TestSecurity_Password lost terms.
//
// The TTL is 4 s (a renewal budget of 1.87 s) rather than the 2 s minimum:
// each password check burns a core for seconds here, and with a second
// core kept busy (ci-loaded) a 833 ms budget was missed by the renewals
// themselves, which need no password check.
func TestSecurity_SlowPasswordCheck(t *testing.T) {
	const ttl = 4 * time.Second
	timing := election.Timing{TTL: ttl}.WithDefaults(etcd.DefaultTTL)
	budget := timing.TTL - timing.SafetyMargin - timing.RenewInterval
	cost := slowBcryptCost(t, 3*budget/2)
	srv := etcdtest.StartWith(t, etcdtest.Options{RootPassword: rootPassword, BcryptCost: cost})
	acli := passwordClient(t, srv, "root", rootPassword)
	if took := timeAuthenticate(t, acli, "root", rootPassword); took <= budget {
		t.Fatalf("precondition: one Authenticate at cost %d took %v, not more than the renewal budget %v", cost, took, budget)
	} else {
		t.Logf("one Authenticate takes %v; a renewal sent %v into a term must be answered within %v",
			took.Round(time.Millisecond), timing.RenewInterval.Round(time.Millisecond), budget.Round(time.Millisecond))
	}
	pfx := prefix(t)
	a := newBackend(t, acli, pfx, ttl)
	b := newBackend(t, passwordClient(t, srv, "root", rootPassword), pfx, ttl)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	la, err := a.Acquire(ctx, election.Identity{ID: "a"})
	if err != nil {
		t.Fatalf("a: Acquire: %v", err)
	}
	t.Logf("a: Acquire took %v", time.Since(start).Round(time.Millisecond))
	defer backendtest.Release(t, la)
	bres := backendtest.AcquireAsync(ctx, b, "b")

	hold := func(name string, l election.Lease, d time.Duration) {
		t.Helper()
		since := time.Now()
		select {
		case <-l.Done():
			t.Fatalf("%s: term ended after %v: %v", name, time.Since(since).Round(time.Millisecond), l.Err())
		case r := <-bres:
			if r.Err == nil {
				r.Lease.Release(ctx)
			}
			t.Fatalf("b: Acquire returned while a leads, after %v: %v", time.Since(since).Round(time.Millisecond), r.Err)
		case <-time.After(d):
		}
	}
	hold("a", la, 2*ttl) // several renewals of a's term and of b's campaign
	backendtest.Release(t, la)
	r := backendtest.Await(t, bres, 10*time.Second, "b: no term 10 s after a released")
	if r.Err != nil {
		t.Fatalf("b: Acquire after a released: %v", r.Err)
	}
	defer backendtest.Release(t, r.Lease)
	bres = nil // b returned: hold watches b's term only
	hold("b", r.Lease, ttl)
}

// TestSecurity_JWTTokens runs elections of a least-privilege user on
// servers handing out JWT tokens. A JWT token expires at a fixed time and
// goes stale at any change to users or roles (ErrAuthOldRevision); the
// keepalive stream, opened with such a token, is then replaced before the
// term's deadline. The servers hash passwords at the lowest bcrypt cost:
// TestSecurity_SlowPasswordCheck is the test of slow password checks.
func TestSecurity_JWTTokens(t *testing.T) {
	timing := election.Timing{TTL: 2 * time.Second}.WithDefaults(etcd.DefaultTTL)

	// lead starts a server with JWT tokens valid for tokenTTL, and a term
	// of user "baton" on it; it returns the term, its logs and a root
	// client.
	lead := func(t *testing.T, tokenTTL time.Duration) (election.Lease, *lines, *clientv3.Client) {
		t.Helper()
		srv := etcdtest.StartWith(t, etcdtest.Options{RootPassword: rootPassword, JWTTokenTTL: tokenTTL, BcryptCost: 4})
		root := passwordClient(t, srv, "root", rootPassword)
		pfx := prefix(t)
		grantElection(t, root, "baton", "baton-secret", pfx)
		logs := &lines{}
		b, err := etcd.New(etcd.Config{
			Client: passwordClient(t, srv, "baton", "baton-secret"), Prefix: pfx, Timing: timing,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		if err != nil {
			t.Fatal(err)
		}
		l := backendtest.Acquire(t, b, "a", acquireWithin)
		t.Cleanup(func() { backendtest.Release(t, l) })
		return l, logs, root
	}
	holds := func(t *testing.T, l election.Lease, logs *lines, root *clientv3.Client, d time.Duration) {
		t.Helper()
		select {
		case <-l.Done():
			t.Fatalf("term ended: %v; logs:\n%s", l.Err(), logs)
		case <-time.After(d):
		}
		if held, why := keyHeld(t, root, l); !held {
			t.Errorf("key not held: %s", why)
		}
	}

	t.Run("TokenExpires", func(t *testing.T) {
		const tokenTTL = 2 * time.Second
		l, logs, root := lead(t, tokenTTL)
		holds(t, l, logs, root, tokenTTL+3*timing.RenewInterval)
		if !logs.contains("invalid auth token") {
			t.Errorf("no keepalive met an expired token; logs:\n%s", logs)
		}
	})
	t.Run("UsersChange", func(t *testing.T) {
		l, logs, root := lead(t, time.Hour)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := root.UserAdd(ctx, "someone-else", "pw-someone-else"); err != nil {
			t.Fatal(err)
		}
		holds(t, l, logs, root, 3*timing.RenewInterval)
		if !logs.contains("revision of auth store is old") {
			t.Errorf("no keepalive met a stale token; logs:\n%s", logs)
		}
	})
}
