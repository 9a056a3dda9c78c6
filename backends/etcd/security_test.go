package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/backends/etcd/etcdtest"
	"github.com/batonhq/baton/election/electiontest"
	"github.com/batonhq/baton/internal/testcerts"
)

const rootPassword = "root-secret"

// creds is how a test client authenticates: the CA it trusts, the client
// certificate it presents (zero: none) and a user name and password.
type creds struct {
	ca         *testcerts.CA
	cert       testcerts.Pair
	user, pass string
}

// secureClient returns a client of srv with c, or clientv3.New's error
// (with a user name, New authenticates before it returns).
func secureClient(t *testing.T, srv *etcdtest.Server, c creds) (*clientv3.Client, error) {
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
		DialTimeout: 2 * time.Second,
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
	cli, err := secureClient(t, srv, c)
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
	b := newBackend(t, cli, pfx, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := b.Check(ctx)
	took := time.Since(start)
	if err == nil {
		t.Fatal("Check succeeded")
	}
	if took > bound {
		t.Errorf("Check took %v, want a failure within %v", took.Round(time.Millisecond), bound)
	}
	t.Logf("Check failed after %v: %v", took.Round(time.Millisecond), err)
	return err
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
	certs := testcerts.New(t, "etcd", "baton")
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
		electiontest.RunSmoke(t, a, b, 10*time.Second)
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
		other := testcerts.New(t, "other", "baton")
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
		other := testcerts.New(t, "other", "baton")
		err := checkFails(t, mustSecureClient(t, srv, creds{ca: other.CA, cert: certs.Client}), pfx, 2*time.Second)
		wantIn(t, err, srv.Endpoint(), "TLS handshake failed", "x509: certificate signed by unknown authority")
	})
}

// TestSecurity_Password runs an etcd with TLS (server certificate only)
// and authentication enabled; clients log in with a user name and
// password. User "baton" has a role limited to one election's prefixes.
func TestSecurity_Password(t *testing.T) {
	certs := testcerts.New(t, "etcd", "unused")
	srv := etcdtest.StartWith(t, etcdtest.Options{
		TLS:          &etcdtest.TLS{CertFile: certs.Server.CertFile, KeyFile: certs.Server.KeyFile, CAFile: certs.CA.CertFile},
		RootPassword: rootPassword,
	})
	root := mustSecureClient(t, srv, creds{ca: certs.CA, user: "root", pass: rootPassword})
	pfx := prefix(t)
	grantElection(t, root, "baton", "baton-secret", pfx)
	good := creds{ca: certs.CA, user: "baton", pass: "baton-secret"}

	t.Run("LeastPrivilegeUser", func(t *testing.T) {
		a := newBackend(t, mustSecureClient(t, srv, good), pfx, 2*time.Second)
		b := newBackend(t, mustSecureClient(t, srv, good), pfx, 2*time.Second)
		electiontest.RunSmoke(t, a, b, 10*time.Second)
	})
	t.Run("Root", func(t *testing.T) {
		rpfx := prefix(t)
		a := newBackend(t, root, rpfx, 2*time.Second)
		b := newBackend(t, mustSecureClient(t, srv, creds{ca: certs.CA, user: "root", pass: rootPassword}), rpfx, 2*time.Second)
		electiontest.RunSmoke(t, a, b, 10*time.Second)
	})
	t.Run("WrongPassword", func(t *testing.T) {
		start := time.Now()
		cli, err := secureClient(t, srv, creds{ca: certs.CA, user: "baton", pass: "wrong"})
		if err == nil {
			// Not every client version authenticates in New: then the
			// first request, Check's, must fail the same way.
			err = checkFails(t, cli, pfx, 2*time.Second)
		}
		if !errors.Is(err, rpctypes.ErrAuthFailed) {
			t.Errorf("err = %v, want ErrAuthFailed", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("wrong password noticed after %v, want within 2 s", took)
		}
		t.Logf("wrong password: %v", err)
	})
	t.Run("NoCredentials", func(t *testing.T) {
		err := checkFails(t, mustSecureClient(t, srv, creds{ca: certs.CA}), pfx, time.Second)
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
		err := checkFails(t, mustSecureClient(t, srv, creds{ca: certs.CA, user: "noledger", pass: "pw-noledger"}), lpfx, time.Second)
		wantIn(t, err, "write probe", "permission denied", lpfx+"-ledger/")
	})
}
