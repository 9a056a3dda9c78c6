package main

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/kubetest"
)

// The Kubernetes rows: baton's backend and client-go's leader election
// (LeaseLock) on Leases of the same real kube-apiserver, at the same
// lease duration. client-go's other settings are its defaults (15/10/2 s)
// scaled to that duration.

// kubeTTL is the lease duration of both Kubernetes rows.
const kubeTTL = 6 * time.Second

// The Kubernetes rows' names, at kubeTTL.
var (
	batonKubeName    = batonKube(&env{}, kubeTTL).name
	clientGoKubeName = clientGoKube(&env{}, kubeTTL).name
)

// kubeName turns an election lane into a Lease name.
func kubeName(lane string) string { return "bench-" + slug(lane) }

func batonKube(e *env, ttl time.Duration) *system {
	// A waiting candidate watches the Lease; without news it looks again
	// when the holder's record would expire.
	return &system{name: fmt.Sprintf("baton Kubernetes Lease (TTL %v)", ttl), proto: "tls", ttl: ttl, hasJob: true, target: e.kubeAddr(),
		start: func(c *cand, lane, addr, mode string) error {
			cli, err := kube.NewClient(kube.ClientConfig{Server: "https://" + addr, Token: kubetest.Token, CAFile: e.kube.CAFile, Timeout: ttl / 3})
			if err != nil {
				return err
			}
			b, err := kube.New(kube.Config{Client: cli, Name: kubeName(lane), Timing: election.Timing{TTL: ttl}, Logger: quiet})
			if err != nil {
				return err
			}
			return batonRun(c, b, mode, cli.CloseIdleConnections)
		}}
}

// clientGoKube is client-go's LeaseLock on the same server: LeaseDuration
// ttl, RenewDeadline 2/3 of it, RetryPeriod 2/15 of it, ReleaseOnCancel.
func clientGoKube(e *env, ttl time.Duration) *system {
	renew, retry := ttl*2/3, ttl*2/15
	return &system{name: fmt.Sprintf("client-go leaderelection, LeaseLock (%v/%v/%v, ReleaseOnCancel)", ttl, renew, retry),
		proto: "tls", ttl: ttl, target: e.kubeAddr(),
		spread: retry * 22 / 10, // RetryPeriod × (1 + JitterFactor 1.2)
		start: func(c *cand, lane, addr, mode string) error {
			cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://" + addr, BearerToken: kubetest.Token,
				TLSClientConfig: rest.TLSClientConfig{CAFile: e.kube.CAFile}, QPS: 50, Burst: 100})
			if err != nil {
				return err
			}
			lock := &rl.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: kubeName(lane), Namespace: "default"},
				Client: cs.CoordinationV1(), LockConfig: rl.ResourceLockConfig{Identity: c.id}}
			return runClientGo(c, lock, ttl, renew, retry, true, c.closeProxy)
		}}
}

// kubeAddr is the API server's host:port.
func (e *env) kubeAddr() string {
	if e.kube == nil {
		return ""
	}
	return e.kube.URL[len("https://"):]
}

// kubeSystems are the Kubernetes rows, none without the server.
func kubeSystems(e *env, ttl time.Duration) []*system {
	if e.kube == nil {
		return nil
	}
	return []*system{batonKube(e, ttl), clientGoKube(e, ttl)}
}
