package kube

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// tlsConfig is the TLS side of cfg: the CAs that sign the server's
// certificate (none given: the system's roots) and the client
// certificate, if any.
func (cfg ClientConfig) tlsConfig() (*tls.Config, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.InsecureSkipVerify}
	if cfg.CAFile != "" || len(cfg.CAData) > 0 {
		pool := x509.NewCertPool()
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("kube: CAFile %q: %w", cfg.CAFile, err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("kube: CAFile %q: no PEM certificate in it", cfg.CAFile)
			}
		}
		if len(cfg.CAData) > 0 && !pool.AppendCertsFromPEM(cfg.CAData) {
			return nil, errors.New("kube: CAData: no PEM certificate in it")
		}
		tlsCfg.RootCAs = pool
	}
	certPEM, keyPEM := cfg.CertData, cfg.KeyData
	if cfg.CertFile != "" {
		b, err := os.ReadFile(cfg.CertFile)
		if err != nil {
			return nil, fmt.Errorf("kube: CertFile %q: %w", cfg.CertFile, err)
		}
		certPEM = b
	}
	if cfg.KeyFile != "" {
		b, err := os.ReadFile(cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kube: KeyFile %q: %w", cfg.KeyFile, err)
		}
		keyPEM = b
	}
	switch {
	case len(certPEM) == 0 && len(keyPEM) == 0:
	case len(certPEM) == 0 || len(keyPEM) == 0:
		return nil, errors.New("kube: a client certificate needs both the certificate (CertFile or CertData) and its key (KeyFile or KeyData)")
	default:
		kp, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("kube: client certificate %q, key %q: %w", cfg.CertFile, cfg.KeyFile, err)
		}
		tlsCfg.Certificates = []tls.Certificate{kp}
	}
	return tlsCfg, nil
}
