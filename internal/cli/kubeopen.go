package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
)

// openKube is the Kubernetes backend the flags describe: the Lease named
// --election, in --kube-namespace, through the API server of
// --kube-server or of the pod's service account. An http:// server is
// refused unless --kube-insecure-http: the bearer token would cross the
// network in clear.
func (b *BackendFlags) openKube(t election.Timing, log *slog.Logger) (*kube.Backend, error) {
	var cc kube.ClientConfig
	if b.kubeServer == "" {
		in, err := kube.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--kube-server: required outside a pod (%w)", err)
		}
		cc = in
		b.kubeTokenFrom = "the pod's service account token " + in.TokenFile
	} else {
		if strings.HasPrefix(strings.ToLower(b.kubeServer), "http://") && !b.kubeInsecureHTTP {
			return nil, fmt.Errorf("--kube-server %q: plain http:// would send the bearer token in clear; use https://, "+
				"or allow it with --kube-insecure-http (kube_insecure_http: true in the backend section) behind a local proxy such as kubectl proxy", b.kubeServer)
		}
		cc.Server = b.kubeServer
	}
	if b.kubeTokenFile != "" {
		cc.TokenFile = b.kubeTokenFile
		b.kubeTokenFrom = "--kube-token-file " + b.kubeTokenFile
	}
	if b.kubeCACert != "" {
		cc.CAFile = b.kubeCACert
	}
	c, err := kube.NewClient(cc)
	if err != nil {
		return nil, err
	}
	ns := b.kubeNamespace
	if ns == "" {
		ns = kube.InClusterNamespace()
	}
	be, err := kube.New(kube.Config{Client: c, Namespace: ns, Name: b.Election, Timing: t, Logger: log})
	if err != nil {
		return nil, err // each problem names its field; settings.locateOpen places it
	}
	return be, nil
}

// Explain adds to an error of the backend's what an operator should check,
// where the error alone does not say: on Kubernetes, a 401 (the API server
// did not accept the bearer token). Other errors are returned as they are.
func (b *BackendFlags) Explain(err error) error {
	var se *kube.StatusError
	if b.Kind != "kube" || !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		return err
	}
	from := b.kubeTokenFrom
	if from == "" {
		from = "no token file"
	}
	return fmt.Errorf("%w: the API server did not accept the bearer token of %s: check that it holds a service account's token "+
		"(kubectl create token NAME), that the token has not expired (kubectl create token gives one for 1 h unless --duration), "+
		"and that its service account still exists", err, from)
}
