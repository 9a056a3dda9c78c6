package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
)

// openKube is the Kubernetes backend the flags describe: the Lease named
// --election, in --kube-namespace, through the API server of, in this
// order: --kube-server; --kubeconfig; the pod's service account; the
// current context of $KUBECONFIG or ~/.kube/config, read as kubectl
// reads it. --kube-token-file and --kube-cacert replace the token and
// CA of any of them. An http:// server is refused unless
// --kube-insecure-http: the bearer token would cross the network in
// clear.
func (b *BackendFlags) openKube(t election.Timing, log *slog.Logger) (*kube.Backend, error) {
	cc, ns, err := b.kubeClientConfig()
	if err != nil {
		return nil, err
	}
	if b.kubeTokenFile != "" {
		cc.Token, cc.TokenFile, cc.TokenFunc = "", b.kubeTokenFile, nil
		b.kubeTokenFrom = "--kube-token-file " + b.kubeTokenFile
	}
	if b.kubeCACert != "" {
		cc.CAFile, cc.CAData = b.kubeCACert, nil
	}
	c, err := kube.NewClient(cc)
	if err != nil {
		return nil, err
	}
	if b.kubeNamespace != "" {
		ns = b.kubeNamespace
	}
	be, err := kube.New(kube.Config{Client: c, Namespace: ns, Name: b.Election, Timing: t, Logger: log})
	if err != nil {
		return nil, err // each problem names its field; settings.locateOpen places it
	}
	return be, nil
}

// kubeClientConfig is where openKube reaches the API server, and the
// namespace that place implies ("" for none).
func (b *BackendFlags) kubeClientConfig() (kube.ClientConfig, string, error) {
	if b.kubeServer != "" {
		if strings.HasPrefix(strings.ToLower(b.kubeServer), "http://") && !b.kubeInsecureHTTP {
			return kube.ClientConfig{}, "", fmt.Errorf("--kube-server %q: plain http:// would send the bearer token in clear; use https://, "+
				"or allow it with --kube-insecure-http (kube_insecure_http: true in the backend section) behind a local proxy such as kubectl proxy", b.kubeServer)
		}
		return kube.ClientConfig{Server: b.kubeServer}, "", nil
	}
	if b.kubeconfig == "" {
		if in, err := kube.InClusterConfig(); err == nil {
			b.kubeTokenFrom = "the pod's service account token " + in.TokenFile
			return in, kube.InClusterNamespace(), nil
		}
	}
	opts := kube.KubeconfigOptions{Context: b.kubeContext, AllowInsecure: b.kubeInsecureSkipVerify}
	if b.kubeconfig != "" {
		opts.Paths = filepath.SplitList(b.kubeconfig)
	}
	kc, err := kube.LoadKubeconfig(opts)
	if err != nil {
		flag := "--kubeconfig"
		if b.kubeconfig == "" {
			flag = "--kube-server or --kubeconfig: outside a pod, without them, the kubeconfig"
		}
		return kube.ClientConfig{}, "", fmt.Errorf("%s: %w", flag, err)
	}
	b.kubeTokenFrom = fmt.Sprintf("the user of context %q in %s", kc.Context, kc.Source)
	b.kubeContextUsed = kc.Context
	return kc.Client, kc.Namespace, nil
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
	if b.kubeContextUsed != "" && b.kubeTokenFile == "" {
		return fmt.Errorf("%w: the API server did not accept the credentials of %s: check them with "+
			"kubectl --context %s auth whoami (an expired token, certificate or exec plugin login)", err, from, b.kubeContextUsed)
	}
	if from == "" {
		from = "no token file"
	}
	return fmt.Errorf("%w: the API server did not accept the bearer token of %s: check that it holds a service account's token "+
		"(kubectl create token NAME), that the token has not expired (kubectl create token gives one for 1 h unless --duration), "+
		"and that its service account still exists", err, from)
}
