// Package interop runs baton's Kubernetes backend against client-go's own
// leader election (k8s.io/client-go/tools/leaderelection with a LeaseLock)
// on one Lease of a real kube-apiserver. It is a module of its own so that
// client-go stays out of baton's go.mod.
package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

func server(t *testing.T) *kubetest.Server { return kubetest.Shared(t) }

// The election's timing on both sides: client-go's LeaseDuration is
// baton's TTL.
const (
	ttl           = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 200 * time.Millisecond
)

// intervals records who led when, on this process's monotonic clock, and
// fails the test at the first overlap.
type intervals struct {
	mu     sync.Mutex
	holder string
	since  time.Time
	log    []string
}

func (iv *intervals) start(t *testing.T, who string) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if iv.holder != "" {
		t.Errorf("two holders: %s leads while %s has led since %v", who, iv.holder, time.Since(iv.since).Round(time.Millisecond))
	}
	iv.holder, iv.since = who, time.Now()
	iv.log = append(iv.log, "start "+who)
}

func (iv *intervals) stop(who string) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if iv.holder == who {
		iv.holder = ""
	}
	iv.log = append(iv.log, "stop "+who)
}

// clientGo runs a client-go candidate named id on the Lease name until
// ctx is done; leading and stopped report its term. With release it
// gives the Lease up on the way out (ReleaseOnCancel); without, it
// leaves it to expire, as a crashed process would.
func clientGo(t *testing.T, ctx context.Context, name, id string, release bool, iv *intervals, leading chan<- struct{}) <-chan struct{} {
	s := server(t)
	cfg := &rest.Config{Host: s.URL, BearerToken: kubetest.Token, TLSClientConfig: rest.TLSClientConfig{CAFile: s.CAFile}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: "default"},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   ttl,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: release,
		Name:            id,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				iv.start(t, id)
				select {
				case leading <- struct{}{}:
				default:
				}
			},
			OnStoppedLeading: func() { iv.stop(id) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(ctx)
	}()
	return done
}

func batonBackend(t *testing.T, name string) *kube.Backend {
	s := server(t)
	c, err := kube.NewClient(kube.ClientConfig{Server: s.URL, Token: kubetest.Token, CAFile: s.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	b, err := kube.New(kube.Config{Client: c, Name: name, Timing: election.Timing{TTL: ttl}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// batonTerm acquires the Lease for id and records the term until it ends.
func batonTerm(t *testing.T, ctx context.Context, b *kube.Backend, id string, iv *intervals) election.Lease {
	l, err := b.Acquire(ctx, election.Identity{ID: id})
	if err != nil {
		t.Fatalf("%s: acquire: %v", id, err)
	}
	iv.start(t, id)
	go func() {
		<-l.Done()
		iv.stop(id)
	}()
	return l
}

const trials = 5

// A client-go leader keeps baton out until it releases or its Lease
// expires; then baton leads, with a token above every earlier baton
// term's.
func TestClientGoThenBaton(t *testing.T) {
	server(t)
	for trial := range trials {
		release := trial%2 == 0
		t.Run(fmt.Sprintf("trial%d-release=%v", trial, release), func(t *testing.T) {
			name := fmt.Sprintf("cg-then-baton-%d-%d", trial, time.Now().UnixNano())
			iv := &intervals{}
			b := batonBackend(t, name)
			first := batonTerm(t, context.Background(), b, "baton-0", iv)
			firstToken := first.Token()
			if err := first.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			waitStopped(t, iv)

			ctx, cancel := context.WithCancel(context.Background())
			leading := make(chan struct{}, 1)
			cgDone := clientGo(t, ctx, name, "client-go", release, iv, leading)
			select {
			case <-leading:
			case <-time.After(10 * time.Second):
				t.Fatal("client-go never led a free Lease")
			}
			// baton waits while client-go renews.
			actx, acancel := context.WithTimeout(context.Background(), 3*ttl)
			_, err := b.Acquire(actx, election.Identity{ID: "baton-early"})
			acancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("baton acquired while client-go led: %v", err)
			}
			start := time.Now()
			cancel() // client-go stops: releases, or leaves the Lease to expire
			<-cgDone
			l := batonTerm(t, context.Background(), b, "baton-1", iv)
			took := time.Since(start)
			t.Logf("baton led %v after client-go stopped (release=%v); tokens %d then %d", took.Round(time.Millisecond), release, firstToken, l.Token())
			if l.Token() <= firstToken {
				t.Errorf("token %d after client-go's term, not above the earlier %d", l.Token(), firstToken)
			}
			if !release && took < ttl-retryPeriod {
				t.Errorf("baton led %v after client-go stopped without releasing, before the Lease's %v could expire", took, ttl)
			}
			l.Release(context.Background())
		})
	}
}

// A baton leader keeps client-go out until it releases or its term
// expires without renewal; then client-go leads.
func TestBatonThenClientGo(t *testing.T) {
	server(t)
	for trial := range trials {
		t.Run(fmt.Sprintf("trial%d", trial), func(t *testing.T) {
			name := fmt.Sprintf("baton-then-cg-%d-%d", trial, time.Now().UnixNano())
			iv := &intervals{}
			b := batonBackend(t, name)
			l := batonTerm(t, context.Background(), b, "baton", iv)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			leading := make(chan struct{}, 1)
			cgDone := clientGo(t, ctx, name, "client-go", true, iv, leading)
			select {
			case <-leading:
				t.Fatal("client-go led while baton held the Lease")
			case <-time.After(3 * ttl):
			}
			start := time.Now()
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			select {
			case <-leading:
			case <-time.After(5 * time.Second):
				t.Fatal("client-go did not lead after baton released")
			}
			t.Logf("client-go led %v after baton released", time.Since(start).Round(time.Millisecond))
			cancel()
			<-cgDone
		})
	}
}

func waitStopped(t *testing.T, iv *intervals) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		iv.mu.Lock()
		h := iv.holder
		iv.mu.Unlock()
		if h == "" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the term did not end")
}

// A baton leader cut off from the server (as a crashed or partitioned
// node) ends its term before client-go can take the Lease.
func TestBatonCutThenClientGo(t *testing.T) {
	s := server(t)
	for trial := range trials {
		t.Run(fmt.Sprintf("trial%d", trial), func(t *testing.T) {
			name := fmt.Sprintf("baton-cut-cg-%d-%d", trial, time.Now().UnixNano())
			iv := &intervals{}
			p := backendtest.NewProxy(t, strings.TrimPrefix(s.URL, "https://"))
			c, err := kube.NewClient(kube.ClientConfig{Server: "https://" + p.Addr(), Token: kubetest.Token, CAFile: s.CAFile, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.CloseIdleConnections)
			b, err := kube.New(kube.Config{Client: c, Name: name, Timing: election.Timing{TTL: ttl}})
			if err != nil {
				t.Fatal(err)
			}
			l := batonTerm(t, context.Background(), b, "baton", iv)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			leading := make(chan struct{}, 1)
			cgDone := clientGo(t, ctx, name, "client-go", true, iv, leading)
			time.Sleep(ttl)
			p.Blackhole()
			start := time.Now()
			select {
			case <-leading:
			case <-time.After(4 * ttl):
				t.Fatal("client-go did not lead after baton was cut off")
			}
			select {
			case <-l.Done():
			default:
				d := l.(election.Deadliner).Deadline()
				t.Fatalf("client-go leads %v after the cut and baton's term has not ended; its deadline is in %v", time.Since(start), time.Until(d))
			}
			t.Logf("client-go led %v after the cut", time.Since(start).Round(time.Millisecond))
			cancel()
			<-cgDone
			p.Heal()
			l.Release(context.Background())
		})
	}
}
