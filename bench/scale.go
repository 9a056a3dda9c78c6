package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/election"
)

// scaleResult is the 50-candidate measurement of one kind.
type scaleResult struct {
	kind         string
	n            int
	toLeader     dist
	handover     dist
	idleCPU      time.Duration // etcd CPU per minute with n idle candidates
	handoverCPU  time.Duration // etcd CPU per handover (stop, next leads, replacement joins)
	startStopCPU time.Duration // etcd CPU per cycle of n candidates starting at once and stopping
	err          error
}

// scaleCand starts a candidate of kind ("baton" or "raw") on cli.
func scaleCand(kind string, cli *clientv3.Client, prefix, id string, ttl time.Duration) (*cand, error) {
	c := newCand(id)
	switch kind {
	case "baton":
		b, err := etcd.New(etcd.Config{Client: cli, Prefix: prefix, Timing: election.Timing{TTL: ttl}, Logger: quiet})
		if err != nil {
			return nil, err
		}
		return c, batonRun(c, b, "idle", func() {})
	default:
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)), concurrency.WithContext(ctx))
			if err != nil {
				return
			}
			defer sess.Close()
			el := concurrency.NewElection(sess, prefix)
			if el.Campaign(ctx, id) != nil {
				return
			}
			c.markLed()
			<-ctx.Done()
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			el.Resign(rctx)
			rcancel()
		}()
		c.stop = func() { cancel(); <-done }
		c.kill = cancel
		return c, nil
	}
}

func stopAll(cs []*cand) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(c.stop)
	}
	wg.Wait()
}

// firstLed returns the candidate of cs that leads first, waiting up to d.
func firstLed(cs []*cand, d time.Duration) *cand {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		var best *cand
		for _, c := range cs {
			if waitCh(c.led, 0) && (best == nil || c.ledAt.Before(best.ledAt)) {
				best = c
			}
		}
		if best != nil {
			return best
		}
		time.Sleep(200 * time.Microsecond)
	}
	return nil
}

// scale runs n candidates of kind on the etcd server, each with its own
// client (as n processes would), and measures: the etcd server's CPU while
// they idle; handover with n-1 waiting (trials times); time to a leader
// when all n start at once on a fresh election (trials times). The etcd
// CPU is the user+system time of the etcd child process (/proc/PID/stat),
// so none of the candidates' own CPU is in it.
func scale(e *env, kind string, n, trials int, idleWindow time.Duration) (r scaleResult) {
	r.kind, r.n = kind, n
	const ttl = 5 * time.Second
	clis := make([]*clientv3.Client, n)
	for i := range clis {
		cli, err := e.etcdClient(e.etcdAddr)
		if err != nil {
			r.err = err
			return r
		}
		clis[i] = cli
		defer cli.Close()
	}
	ids := 0
	start := func(i int, prefix string) (*cand, error) {
		ids++
		return scaleCand(kind, clis[i], prefix, fmt.Sprintf("%s-%d", kind, ids), ttl)
	}

	// Idle, then handovers, on one election.
	prefix := "/bench-scale/" + kind
	// The candidates join in turn, as a rolling start does.
	cs, leader, err := startLed(n, 2*time.Millisecond, 60*time.Second, func(i int) (*cand, error) { return start(i, prefix) })
	if err != nil {
		r.err = fmt.Errorf("scale %s: %w", kind, err)
		return r
	}
	time.Sleep(2 * time.Second)
	c0 := e.etcdCPU()
	time.Sleep(idleWindow)
	r.idleCPU = time.Duration(float64(e.etcdCPU()-c0) * float64(time.Minute) / float64(idleWindow))
	c0 = e.etcdCPU()
	for range trials {
		time.Sleep(jitter(100*time.Millisecond, 250*time.Millisecond))
		li := -1
		for i, c := range cs {
			if c == leader {
				li = i
			}
		}
		t0 := time.Now()
		leader.stop()
		rest := append(append([]*cand(nil), cs[:li]...), cs[li+1:]...)
		next := firstLed(rest, 30*time.Second)
		if next == nil {
			r.err = fmt.Errorf("scale %s: no handover", kind)
			stopAll(rest)
			return r
		}
		r.handover.add(next.ledAt.Sub(t0))
		c, err := start(li, prefix)
		if err != nil {
			r.err = err
			stopAll(rest)
			return r
		}
		cs[li], leader = c, next
	}
	r.handoverCPU = (e.etcdCPU() - c0) / time.Duration(trials)
	stopAll(cs)

	// Time to a leader: n candidates start at once on a fresh election.
	c0 = e.etcdCPU()
	for t := range trials {
		prefix := fmt.Sprintf("/bench-scale/%s-start-%d", kind, t)
		t0 := time.Now()
		cs, first, err := startLed(n, 0, 30*time.Second, func(i int) (*cand, error) { return start(i, prefix) })
		if err != nil {
			r.err = fmt.Errorf("scale %s: at start: %w", kind, err)
			return r
		}
		r.toLeader.add(first.ledAt.Sub(t0))
		stopAll(cs)
	}
	r.startStopCPU = (e.etcdCPU() - c0) / time.Duration(trials)
	return r
}

// startLed starts n candidates, start(0) to start(n-1), pausing for
// pause after each, and returns them with the first of them to lead
// within wait. If a start fails or none leads in time, it stops those
// started and returns an error.
func startLed(n int, pause, wait time.Duration, start func(i int) (*cand, error)) ([]*cand, *cand, error) {
	cs := make([]*cand, n)
	for i := range cs {
		c, err := start(i)
		if err != nil {
			stopAll(cs[:i])
			return nil, nil, err
		}
		cs[i] = c
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	first := firstLed(cs, wait)
	if first == nil {
		stopAll(cs)
		return nil, nil, errors.New("no leader")
	}
	return cs, first, nil
}
