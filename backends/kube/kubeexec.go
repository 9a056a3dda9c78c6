package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// kcExec is a kubeconfig user's exec credential plugin.
type kcExec struct {
	APIVersion string   `yaml:"apiVersion"`
	Command    string   `yaml:"command"`
	Args       []string `yaml:"args"`
	Env        []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	InstallHint        string `yaml:"installHint"`
	ProvideClusterInfo bool   `yaml:"provideClusterInfo"`
}

// The ExecCredential versions the plugin may speak.
var execVersions = map[string]bool{
	"client.authentication.k8s.io/v1":      true,
	"client.authentication.k8s.io/v1beta1": true,
}

// execBound is how long one run of a plugin may take; execEarly is how
// long before its expirationTimestamp a token is fetched again.
const (
	execBound = time.Minute
	execEarly = 10 * time.Second
)

// execPlugin runs a kubeconfig's exec plugin for a bearer token, and runs
// it again when the token it gave reaches its expirationTimestamp (a
// token without one is kept).
type execPlugin struct {
	cfg    kcExec
	server string

	running sync.Mutex // held while the plugin runs: one run at a time
	mu      sync.Mutex
	tok     string
	expires time.Time // zero: never
}

func newExecPlugin(cfg kcExec, dir, server string) (*execPlugin, error) {
	if !execVersions[cfg.APIVersion] {
		return nil, fmt.Errorf("user exec apiVersion %q: want client.authentication.k8s.io/v1 or v1beta1", cfg.APIVersion)
	}
	if cfg.Command == "" {
		return nil, errors.New("user exec command: empty")
	}
	if strings.ContainsRune(cfg.Command, os.PathSeparator) {
		cfg.Command = rel(dir, cfg.Command) // as kubectl: relative to the kubeconfig
	}
	return &execPlugin{cfg: cfg, server: server}, nil
}

func (p *execPlugin) token() (string, error) {
	if tok, fresh, valid := p.cached(); fresh {
		return tok, nil
	} else if valid && !p.running.TryLock() {
		return tok, nil // another request runs the plugin; this token still holds
	} else if !valid {
		p.running.Lock()
	}
	defer p.running.Unlock()
	if tok, fresh, _ := p.cached(); fresh {
		return tok, nil // the run this request waited for got one
	}
	tok, exp, err := p.run()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.tok != "" && (p.expires.IsZero() || time.Now().Before(p.expires)) {
			return p.tok, nil // still valid a little longer
		}
		return "", err
	}
	p.tok, p.expires = tok, exp
	return tok, nil
}

// cached is the token in hand: fresh while more than execEarly from its
// expiry, valid until then.
func (p *execPlugin) cached() (tok string, fresh, valid bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tok == "" {
		return "", false, false
	}
	if p.expires.IsZero() {
		return p.tok, true, true
	}
	left := time.Until(p.expires)
	return p.tok, left > execEarly, left > 0
}

// run runs the plugin once: its ExecCredential's token and expiry.
func (p *execPlugin) run() (string, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), execBound)
	defer cancel()
	spec := map[string]any{"interactive": false}
	if p.cfg.ProvideClusterInfo {
		spec["cluster"] = map[string]any{"server": p.server}
	}
	info, _ := json.Marshal(map[string]any{"apiVersion": p.cfg.APIVersion, "kind": "ExecCredential", "spec": spec})
	cmd := exec.CommandContext(ctx, p.cfg.Command, p.cfg.Args...)
	cmd.Env = append(os.Environ(), "KUBERNETES_EXEC_INFO="+string(info))
	for _, e := range p.cfg.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		msg := fmt.Sprintf("user exec command %q: %v", p.cfg.Command, err)
		if s := strings.TrimSpace(stderr.String()); s != "" {
			msg += ": " + truncate(s, 300)
		}
		if errors.Is(err, exec.ErrNotFound) && p.cfg.InstallHint != "" {
			msg += " (" + p.cfg.InstallHint + ")"
		}
		return "", time.Time{}, errors.New("kube: " + msg)
	}
	var cred struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Status     *struct {
			Token               string    `json:"token"`
			ExpirationTimestamp time.Time `json:"expirationTimestamp"`
			ClientCertData      string    `json:"clientCertificateData"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out.Bytes(), &cred); err != nil {
		return "", time.Time{}, fmt.Errorf("kube: user exec command %q: its output is not an ExecCredential: %w", p.cfg.Command, err)
	}
	switch {
	case cred.Kind != "ExecCredential" || cred.APIVersion != p.cfg.APIVersion:
		return "", time.Time{}, fmt.Errorf("kube: user exec command %q: printed %s %s, want ExecCredential %s", p.cfg.Command, cred.APIVersion, cred.Kind, p.cfg.APIVersion)
	case cred.Status == nil || (cred.Status.Token == "" && cred.Status.ClientCertData != ""):
		return "", time.Time{}, fmt.Errorf("kube: user exec command %q: status.token: empty (a client certificate from a plugin is not supported)", p.cfg.Command)
	case cred.Status.Token == "":
		return "", time.Time{}, fmt.Errorf("kube: user exec command %q: status.token: empty", p.cfg.Command)
	}
	return cred.Status.Token, cred.Status.ExpirationTimestamp, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
