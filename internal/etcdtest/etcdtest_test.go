package etcdtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/internal/certtest"
	"github.com/batonhq/baton/internal/etcdtest"
)

// plainClient returns a client of s (no TLS, no user); the caller closes
// it.
func plainClient(t *testing.T, s *etcdtest.Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

func TestServer_RestartKeepsDataAndEndpoint(t *testing.T) {
	s := etcdtest.Start(t)
	cli := plainClient(t, s)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("after restart: %v", resp.Kvs)
	}
}

func TestStartDir_ReusesDataDirOnNewPorts(t *testing.T) {
	dir := t.TempDir()
	s, err := etcdtest.StartDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	put := func(s *etcdtest.Server, k string) []byte {
		cli := plainClient(t, s)
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if k != "" {
			if _, err := cli.Put(ctx, k, "v"); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := cli.Get(ctx, "first")
		if err != nil || len(resp.Kvs) == 0 {
			t.Fatalf("get: %v, %v", resp, err)
		}
		return resp.Kvs[0].Value
	}
	put(s, "first")
	s.Stop()
	s2, err := etcdtest.StartDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Stop()
	if v := put(s2, ""); string(v) != "v" {
		t.Fatalf("value after reopening the data dir = %q", v)
	}
}

// TestStartWith_TLSAndAuth: a server with client-certificate TLS and
// authentication serves https, refuses a request without credentials,
// accepts root's, and keeps both across Restart.
func TestStartWith_TLSAndAuth(t *testing.T) {
	certs := certtest.New(t, "etcdtest", "admin")
	s := etcdtest.StartWith(t, etcdtest.Options{
		TLS: &etcdtest.TLS{CertFile: certs.Server.CertFile, KeyFile: certs.Server.KeyFile, CAFile: certs.CA.CertFile,
			ClientCertAuth: true, AdminCertFile: certs.Client.CertFile, AdminKeyFile: certs.Client.KeyFile},
		RootPassword: "pw",
	})
	if !strings.HasPrefix(s.Endpoint(), "https://") {
		t.Fatalf("Endpoint() = %s, want https", s.Endpoint())
	}
	tc, err := certs.CA.ClientTLS(certs.Client)
	if err != nil {
		t.Fatal(err)
	}
	client := func(user, pass string) *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, TLS: tc, Username: user, Password: pass,
			DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client("", "").Put(ctx, "k", "v"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("put as the certificate's user admin (no such user): %v, want permission denied", err)
	}
	if _, err := client("root", "pw").Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put as root: %v", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	resp, err := client("root", "pw").Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get as root after restart: %v, %v", resp, err)
	}
	if _, err := client("", "").Get(ctx, "k"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("get without a user after restart: %v, want permission denied", err)
	}
}

func TestStartDirWith_RefusesBadBcryptCost(t *testing.T) {
	for _, cost := range []int{3, 32, -1} {
		if s, err := etcdtest.StartDirWith(t.TempDir(), etcdtest.Options{BcryptCost: cost}); err == nil {
			s.Stop()
			t.Errorf("BcryptCost %d accepted", cost)
		} else if !strings.Contains(err.Error(), "BcryptCost") {
			t.Errorf("BcryptCost %d: %v; want an error naming BcryptCost", cost, err)
		}
	}
}
