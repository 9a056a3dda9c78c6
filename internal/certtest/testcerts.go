// Package certtest generates throwaway certificates for tests that run
// real servers with TLS: a CA, a server certificate for 127.0.0.1, ::1 and
// localhost, and client certificates, all ECDSA P-256, valid for a day,
// written as PEM files.
//
// Nothing here is fit for production: keys are written unencrypted to a
// test's temporary directory.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// validity is how long generated certificates are valid, counted from an
// hour ago (so that a slightly slow clock still accepts them).
const validity = 24 * time.Hour

// CA is a certificate authority that signs server and client
// certificates. Its methods are safe for concurrent use.
type CA struct {
	// Dir is where the CA's files and every certificate it issues are
	// written.
	Dir string
	// CertFile is the CA certificate (PEM), the file servers and clients
	// trust.
	CertFile string

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Pair names a certificate and its private key, both PEM files.
type Pair struct {
	CertFile string
	KeyFile  string
}

// NewCA generates a CA named name and writes its certificate to
// dir/name-ca.pem (and its key to dir/name-ca-key.pem).
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certtest: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name + " test CA", Organization: []string{"baton tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certtest: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certtest: CA: %w", err)
	}
	ca := &CA{Dir: dir, cert: cert, key: key}
	p, err := ca.write(name+"-ca", der, key)
	if err != nil {
		return nil, err
	}
	ca.CertFile = p.CertFile
	return ca, nil
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost,
// written to dir/name.pem and dir/name-key.pem. It is also valid as a
// client certificate, because servers such as etcd use their own
// certificate for their internal clients (etcd's gRPC gateway).
func (ca *CA) Server(name string) (Pair, error) {
	tmpl := ca.leaf(name)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	tmpl.DNSNames = []string{"localhost"}
	return ca.issue(name, tmpl)
}

// Client issues a client certificate whose subject common name is cn (etcd
// takes it as the user name when client-certificate auth and auth are both
// on), written to dir/cn-client.pem and dir/cn-client-key.pem.
func (ca *CA) Client(cn string) (Pair, error) {
	tmpl := ca.leaf(cn)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(cn+"-client", tmpl)
}

// ClientIn is Client with the subject's organizations set to groups
// (a kube-apiserver takes them as the user's groups).
func (ca *CA) ClientIn(cn string, groups ...string) (Pair, error) {
	tmpl := ca.leaf(cn)
	tmpl.Subject.Organization = groups
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(cn+"-client", tmpl)
}

// Pool returns a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// ClientTLS returns a client TLS configuration trusting only this CA and,
// if cert is not the zero Pair, presenting cert.
func (ca *CA) ClientTLS(cert Pair) (*tls.Config, error) {
	c := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != (Pair{}) {
		kp, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("certtest: %w", err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}

func (ca *CA) leaf(cn string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"baton tests"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func (ca *CA) issue(name string, tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("certtest: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("certtest: %s: %w", name, err)
	}
	return ca.write(name, der, key)
}

func (ca *CA) write(name string, der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("certtest: %w", err)
	}
	p := Pair{CertFile: filepath.Join(ca.Dir, name+".pem"), KeyFile: filepath.Join(ca.Dir, name+"-key.pem")}
	if err := os.WriteFile(p.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return Pair{}, fmt.Errorf("certtest: %w", err)
	}
	if err := os.WriteFile(p.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return Pair{}, fmt.Errorf("certtest: %w", err)
	}
	return p, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// Set is a CA with a server certificate and one client certificate,
// generated together for a test.
type Set struct {
	CA     *CA
	Server Pair
	Client Pair
}

// New generates a Set in a temporary directory of t: a CA named name, a
// server certificate for loopback, and a client certificate with common
// name clientCN. It fails t on error.
func New(t testing.TB, name, clientCN string) *Set {
	t.Helper()
	s, err := Generate(t.TempDir(), name, clientCN)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Generate is New without a testing.TB, writing into dir.
func Generate(dir, name, clientCN string) (*Set, error) {
	ca, err := NewCA(dir, name)
	if err != nil {
		return nil, err
	}
	srv, err := ca.Server(name + "-server")
	if err != nil {
		return nil, err
	}
	cli, err := ca.Client(clientCN)
	if err != nil {
		return nil, err
	}
	return &Set{CA: ca, Server: srv, Client: cli}, nil
}
