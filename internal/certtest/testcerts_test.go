package certtest_test

import (
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/certtest"
	"github.com/batonhq/baton/internal/envtest"
)

// TestSet_Handshake: a TLS server with the generated server certificate,
// requiring client certificates from the CA, accepts the generated client
// and refuses one from another CA.
func TestSet_Handshake(t *testing.T) {
	s := certtest.New(t, "hs", "alice")
	other := certtest.New(t, "other", "mallory")
	srvCert, err := tls.LoadX509KeyPair(s.Server.CertFile, s.Server.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{srvCert},
		ClientCAs:    s.CA.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	envtest.Serve(ln, func(c net.Conn) {
		tc := c.(*tls.Conn)
		if tc.Handshake() == nil {
			_, _ = io.WriteString(c, tc.ConnectionState().PeerCertificates[0].Subject.CommonName)
		}
	})
	dial := func(cfg *tls.Config) (string, error) {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return "", err
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		return string(b), err
	}
	good, err := s.CA.ClientTLS(s.Client)
	if err != nil {
		t.Fatal(err)
	}
	if cn, err := dial(good); err != nil || cn != "alice" {
		t.Errorf("own client: %q, %v; want alice", cn, err)
	}
	good.ServerName = "localhost"
	if _, err := dial(good); err != nil {
		t.Errorf("own client as localhost: %v", err)
	}
	foreign, err := s.CA.ClientTLS(other.Client)
	if err != nil {
		t.Fatal(err)
	}
	if cn, err := dial(foreign); err == nil && cn != "" {
		t.Errorf("client of another CA accepted as %q", cn)
	}
	untrusting, err := other.CA.ClientTLS(other.Client)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(untrusting); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client trusting another CA: %v, want a certificate error", err)
	}
}
