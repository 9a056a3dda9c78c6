package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

func init() { klog.SetLogger(logr.Discard()) }

// memStore is an in-memory stand-in for a Lease object on an API server:
// one record with a resource version, updated with optimistic concurrency
// (an Update based on a stale Get fails with Conflict), as the API server
// does for LeaseLock.
type memStore struct {
	mu  sync.Mutex
	rec *rl.LeaderElectionRecord
	ver int64
}

var leaseGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// memLock is one candidate's resourcelock.Interface on a memStore, like a
// LeaseLock with its own client. cut makes every call hang until its
// context ends, as with an unreachable API server.
type memLock struct {
	s    *memStore
	id   string
	seen int64 // resource version of the last Get/Create/Update
	cut  atomic.Bool

	cmu    sync.Mutex
	counts map[string]int64
}

func (l *memLock) count(k string) {
	l.cmu.Lock()
	if l.counts == nil {
		l.counts = map[string]int64{}
	}
	l.counts[k]++
	l.cmu.Unlock()
}

func (l *memLock) Counts() map[string]int64 {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	m := map[string]int64{}
	for k, v := range l.counts {
		m[k] = v
	}
	return m
}

func (l *memLock) writeKind(r rl.LeaderElectionRecord) string {
	if r.HolderIdentity == l.id {
		return kRenew
	}
	return kWrite
}

var _ rl.Interface = (*memLock)(nil)

func (l *memLock) hang(ctx context.Context) error {
	if l.cut.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (l *memLock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	l.count(kRead)
	if err := l.hang(ctx); err != nil {
		return nil, nil, err
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.rec == nil {
		return nil, nil, apierrors.NewNotFound(leaseGR, "bench")
	}
	r := *l.s.rec
	l.seen = l.s.ver
	raw, err := json.Marshal(r)
	return &r, raw, err
}

func (l *memLock) Create(ctx context.Context, r rl.LeaderElectionRecord) error {
	l.count(kWrite)
	if err := l.hang(ctx); err != nil {
		return err
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.rec != nil {
		return apierrors.NewAlreadyExists(leaseGR, "bench")
	}
	l.s.rec, l.s.ver = &r, l.s.ver+1
	l.seen = l.s.ver
	return nil
}

func (l *memLock) Update(ctx context.Context, r rl.LeaderElectionRecord) error {
	l.count(l.writeKind(r))
	if err := l.hang(ctx); err != nil {
		return err
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.rec == nil {
		return errors.New("lease not initialized, call get or create first")
	}
	if l.seen != l.s.ver {
		return apierrors.NewConflict(leaseGR, "bench", errors.New("the object has been modified"))
	}
	l.s.rec, l.s.ver = &r, l.s.ver+1
	l.seen = l.s.ver
	return nil
}

func (l *memLock) RecordEvent(string) {}
func (l *memLock) Identity() string   { return l.id }
func (l *memLock) Describe() string   { return "memory/bench" }

// clientGo is k8s.io/client-go/tools/leaderelection at its documented
// defaults (LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s) with
// ReleaseOnCancel, on memLock. Candidates of one lane share a memStore.
type clientGo struct {
	mu     sync.Mutex
	stores map[string]*memStore
}

// Names of the two client-go configurations.
const (
	cgName        = "client-go leaderelection (15/10/2 s, ReleaseOnCancel, in-memory lock)"
	cgDefaultName = "client-go leaderelection (15/10/2 s, defaults: no ReleaseOnCancel, in-memory lock)"
)

// newClientGo returns client-go's elector, with ReleaseOnCancel (needed
// for a prompt graceful handover) or at its default (false).
func newClientGo(releaseOnCancel bool) *system {
	g := &clientGo{stores: map[string]*memStore{}}
	name := cgDefaultName
	if releaseOnCancel {
		name = cgName
	}
	return &system{name: name, proto: "", ttl: 15 * time.Second,
		spread: 2 * time.Second * 22 / 10, // RetryPeriod × (1 + JitterFactor 1.2)
		start: func(c *cand, lane, addr, mode string) error {
			g.mu.Lock()
			st := g.stores[lane]
			if st == nil {
				st = &memStore{}
				g.stores[lane] = st
			}
			lock := &memLock{s: st, id: c.id}
			g.mu.Unlock()
			c.cutFn = func() { lock.cut.Store(true) }
			c.countFn = lock.Counts
			return runClientGo(c, lock, 15*time.Second, 10*time.Second, 2*time.Second, releaseOnCancel, nil)
		}}
}

// runClientGo runs candidate c as a client-go leader elector on lock, with
// the given LeaseDuration, RenewDeadline and RetryPeriod, and sets c's
// stop (graceful: its term ends without a loss) and kill. after, if not
// nil, runs once the elector is stopped or killed (closing c's proxy).
func runClientGo(c *cand, lock rl.Interface, lease, renew, retry time.Duration, releaseOnCancel bool, after func()) error {
	var stopping atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   lease,
		RenewDeadline:   renew,
		RetryPeriod:     retry,
		ReleaseOnCancel: releaseOnCancel,
		Name:            "bench",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				c.markLed()
				<-ctx.Done()
				if !stopping.Load() {
					c.markLost()
				}
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return err
	}
	if after == nil {
		after = func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ctx) }()
	c.stop = func() { stopping.Store(true); cancel(); <-done; after() }
	c.kill = func() { cancel(); after() }
	return nil
}
