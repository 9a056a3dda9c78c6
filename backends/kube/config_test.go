package kube_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
)

func TestConfigValidate(t *testing.T) {
	c, err := kube.NewClient(kube.ClientConfig{Server: "https://127.0.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  kube.Config
		want []string
	}{
		{"ok", kube.Config{Client: c, Name: "reports"}, nil},
		{"dotted name", kube.Config{Client: c, Name: "reports.batch", Namespace: "jobs"}, nil},
		{"no client", kube.Config{Name: "reports"}, []string{"Client <nil>: required"}},
		{"no name", kube.Config{Client: c}, []string{`Name "": must be a DNS subdomain`}},
		{"upper case", kube.Config{Client: c, Name: "Reports"}, []string{`Name "Reports"`}},
		{"dotted namespace", kube.Config{Client: c, Name: "r", Namespace: "a.b"}, []string{`Namespace "a.b": must be a DNS label`}},
		{"ttl not whole seconds", kube.Config{Client: c, Name: "r", Timing: election.Timing{TTL: 4500 * time.Millisecond}},
			[]string{"TTL 4.5s: must be a whole multiple of 1s"}},
		{"ttl too short", kube.Config{Client: c, Name: "r", Timing: election.Timing{TTL: 2 * time.Second, RenewInterval: 500 * time.Millisecond}},
			[]string{"TTL 2s: below the backend minimum 3s", "RenewInterval 500ms: below 1s"}},
		{"all at once", kube.Config{Name: "R", Namespace: "x_y"},
			[]string{"Client <nil>", `Name "R"`, `Namespace "x_y"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			envtest.WantErrors(t, tc.cfg.Validate(), tc.want)
		})
	}
}

func TestNewClientErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  kube.ClientConfig
		want string
	}{
		{kube.ClientConfig{Server: "127.0.0.1:6443"}, `Server "127.0.0.1:6443": want an http(s)://host:port URL`},
		{kube.ClientConfig{Server: "https://h:1", CAFile: "/nonexistent/ca.crt"}, `CAFile "/nonexistent/ca.crt"`},
		{kube.ClientConfig{Server: "https://h:1", TokenFile: "/nonexistent/token"}, `TokenFile "/nonexistent/token"`},
	} {
		_, err := kube.NewClient(tc.cfg)
		envtest.WantErrors(t, err, []string{tc.want})
	}
}
