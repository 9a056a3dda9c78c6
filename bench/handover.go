package main

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// waitCh waits for ch up to d.
func waitCh(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// jitter returns base plus a uniform random duration in [0, spread).
func jitter(base, spread time.Duration) time.Duration {
	if spread <= 0 {
		return base
	}
	return base + rand.N(spread)
}

// handover measures graceful handover: two instances, one leads, the other
// waits; the leader is stopped as on SIGTERM (no job running); the time is
// from the stop request to the other instance's lead function starting.
// The stopped instance is started again (a restarted process) and becomes
// the waiting one; then the roles swap. Before each stop the waiting
// instance settles for a random 100-350 ms (plus a random fraction of the
// period it looks at the backend by, if it polls: s.spread), so that the stop falls at a random phase of
// its poll or renew timers.
func handover(s *system, lane string, trials int) (dist, error) {
	var d dist
	ids := 0
	next := func() (*cand, error) {
		ids++
		return s.launch(lane, fmt.Sprintf("%s-%d", lane, ids), "idle", false)
	}
	leader, err := next()
	if err != nil {
		return d, err
	}
	if !waitCh(leader.led, 60*time.Second) {
		leader.stop()
		return d, fmt.Errorf("%s: first leader not elected", s.name)
	}
	follower, err := next()
	if err != nil {
		leader.stop()
		return d, err
	}
	defer func() { follower.stop() }()
	for range trials {
		time.Sleep(jitter(100*time.Millisecond, 250*time.Millisecond+s.spread))
		t0 := time.Now()
		stopped := make(chan struct{})
		go func(c *cand) { c.stop(); close(stopped) }(leader)
		if !waitCh(follower.led, 60*time.Second) {
			<-stopped
			return d, fmt.Errorf("%s: no handover within 60 s", s.name)
		}
		d.add(follower.ledAt.Sub(t0))
		<-stopped
		leader = follower
		if follower, err = next(); err != nil {
			follower = leader
			return d, err
		}
	}
	leader.stop()
	return d, nil
}
