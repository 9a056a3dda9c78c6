package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/kubetest"
)

// Faults of the Kubernetes backend's servers, beside the backend restart
// (the API server killed and started again).
const (
	fKubeStopAPI   = "apiserver-stop"   // SIGSTOP of the kube-apiserver for 0.5-3 s
	fKubeSecondAPI = "apiserver-second" // a second kube-apiserver on the same etcd takes the nodes' traffic for 2-6 s
	fKubeEtcd      = "apiserver-etcd"   // etcd under the API server stopped (SIGTERM) and started again
)

// newKube is the Kubernetes backend: an etcd and a kube-apiserver of its
// own (.bin, built by make tools), the election a Lease and the ledger
// and job control ConfigMaps beside it. Each node reaches the API server
// through a proxy of its own, over TLS, with the administrator's token.
func newKube(ctx context.Context, dir string) (*backend, error) {
	kdir := filepath.Join(dir, "kube")
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		return nil, err
	}
	srv, err := kubetest.Start(ctx, kdir, kubetest.Options{})
	if errors.Is(err, kubetest.ErrNoBinary) {
		return nil, fmt.Errorf("%w: %v", envtest.ErrUnavailable, err)
	}
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "kube-token")
	if err := os.WriteFile(tokenFile, []byte(kubetest.Token+"\n"), 0o600); err != nil {
		srv.Close()
		return nil, err
	}
	ttl := 3 * time.Second
	be := &backend{
		name: "kube", topology: "one kube-apiserver on one etcd member (.bin), each node reaching the API server through a proxy of its own",
		target: strings.TrimPrefix(srv.URL, "https://"), nodes: 4, ttl: ttl, grace: 30 * time.Second,
		// A candidate takes the Lease a TTL after it saw the last renewal.
		crashBound: ttl + time.Second, handoverBound: time.Second + reconnectAllowance,
		args: func(addrs []string) []string {
			return []string{"--backend", "kube", "--kube-server", "https://" + addrs[0], "--kube-token-file", tokenFile, "--kube-cacert", srv.CAFile}
		},
		restart:     srv.KillAPI,
		restartKind: "kube-apiserver killed (SIGKILL) and started again on the same port",
		close:       srv.Close,
	}
	be.faults = []backendFault{
		{fKubeStopAPI, func(ctx context.Context, sc *scenario, kind string) error {
			d := time.Duration(500+sc.rng.IntN(2500)) * time.Millisecond
			if err := srv.SignalAPI(syscall.SIGSTOP); err != nil {
				return err
			}
			sc.note(kind, "apiserver", "kube-apiserver SIGSTOPped for %v", d)
			time.Sleep(d)
			if err := srv.SignalAPI(syscall.SIGCONT); err != nil {
				return err
			}
			sc.note(kind+"-end", "apiserver", "SIGCONT")
			return nil
		}},
		{fKubeSecondAPI, func(ctx context.Context, sc *scenario, kind string) error {
			addr, stop, err := srv.StartSecondAPI(ctx)
			if err != nil {
				return err
			}
			defer stop()
			d := time.Duration(2000+sc.rng.IntN(4000)) * time.Millisecond
			for _, s := range sc.slots {
				for _, p := range s.proxies {
					p.Retarget(addr)
				}
			}
			sc.note(kind, "apiserver", "a second kube-apiserver on the same etcd (%s) takes every node's connections for %v", addr, d)
			time.Sleep(d)
			for _, s := range sc.slots {
				for _, p := range s.proxies {
					p.Retarget(be.target)
				}
			}
			sc.note(kind+"-end", "apiserver", "the nodes' connections back on the first; the second stopped")
			return nil
		}},
		{fKubeEtcd, func(ctx context.Context, sc *scenario, kind string) error {
			sc.note(kind, "etcd", "etcd under the kube-apiserver stopped (SIGTERM) and started again on its data")
			if err := srv.RestartEtcd(ctx); err != nil {
				return err
			}
			sc.note(kind+"-end", "etcd", "etcd and the kube-apiserver answer")
			return nil
		}},
	}
	return be, nil
}
