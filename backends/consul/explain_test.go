package consul

import (
	"errors"
	"strings"
	"testing"
)

// The forms a refused client certificate takes on the client under TLS
// 1.3, where the server's alert can be lost: each is explained.
func TestExplain_RefusedClientCertificate(t *testing.T) {
	b := &Backend{cfg: Config{Key: "k"}}
	url := `Get "https://127.0.0.1:8501/v1/kv/k": `
	for _, cause := range []string{
		"write tcp 127.0.0.1:1->127.0.0.1:8501: write: broken pipe",
		"read tcp 127.0.0.1:1->127.0.0.1:8501: read: connection reset by peer",
		"http2: client conn could not be established",
	} {
		err := b.explain(errors.New(url + cause))
		if !strings.Contains(err.Error(), "tls: the server closed the connection right after the TLS handshake") {
			t.Errorf("%s: not explained: %v", cause, err)
		}
	}
	if err := b.explain(errors.New(`Get "http://127.0.0.1:8500/v1/kv/k": connection reset by peer`)); strings.Contains(err.Error(), "tls:") {
		t.Errorf("a plain HTTP reset explained as TLS: %v", err)
	}
}
