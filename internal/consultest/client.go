package consultest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
)

// do sends an HTTP request to the agent's API, with its management token
// if it has one, and returns the body of a 200 answer.
func (a *Agent) do(ctx context.Context, method, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+a.HTTPAddr+path, nil)
	if err != nil {
		return nil, err
	}
	if a.ManagementToken != "" {
		req.Header.Set("X-Consul-Token", a.ManagementToken)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// httpClient keeps no idle connections: agents are restarted on the same
// ports.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// getJSON decodes the answer to GET path into v.
func (a *Agent) getJSON(ctx context.Context, path string, v any) error {
	b, err := a.do(ctx, "GET", path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Client returns a new API client for the agent, or for addr (host:port,
// e.g. a proxytest in front of the agent) when addr is not empty. Each
// call makes its own HTTP transport, so clients share no connections. It
// sends no ACL token (whatever CONSUL_HTTP_TOKEN says): on an agent with
// ACLs it acts as the anonymous token.
func (a *Agent) Client(addr string) (*api.Client, error) {
	return a.ClientWithToken(addr, "")
}

// ClientWithToken is Client sending the ACL token token.
func (a *Agent) ClientWithToken(addr, token string) (*api.Client, error) {
	if addr == "" {
		addr = a.HTTPAddr
	}
	cfg := api.DefaultNonPooledConfig()
	cfg.Address = addr
	cfg.Scheme = "http"
	cfg.Token = token
	cfg.TokenFile = ""
	return api.NewClient(cfg)
}
