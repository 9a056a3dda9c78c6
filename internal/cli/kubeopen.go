package cli

import (
	"fmt"
	"log/slog"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
)

// openKube is the Kubernetes backend the flags describe: the Lease named
// --election, in --kube-namespace, through the API server of
// --kube-server or of the pod's service account.
func (b *BackendFlags) openKube(t election.Timing, log *slog.Logger) (*kube.Backend, error) {
	var cc kube.ClientConfig
	if b.kubeServer == "" {
		in, err := kube.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--kube-server: required outside a pod (%w)", err)
		}
		cc = in
	} else {
		cc.Server = b.kubeServer
	}
	if b.kubeTokenFile != "" {
		cc.TokenFile = b.kubeTokenFile
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
		return nil, fmt.Errorf("--election %q names the Lease: %w", b.Election, err)
	}
	return be, nil
}
