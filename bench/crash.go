package main

import (
	"fmt"
	"sync"
	"time"
)

// crashResult holds the crash failover and loss detection samples of one
// system.
type crashResult struct {
	failover   dist // cut -> next leader's lead starts
	detect     dist // cut -> old leader's job (or term) cancelled for loss
	gap        dist // next leader starts - old leader's loss detected
	undetected int  // trials where the old leader had not noticed TTL + 5 s after the next leader started
	errs       []string
}

// crash runs trials of: a leader (with a job in flight, for baton) and a
// waiting follower, each with its own proxy; the leader's proxy is
// blackholed (a crash as the backend sees it: no release, no renewal; the
// process itself goes on, so that its loss detection is timed too). lanes
// independent elections run side by side, each doing trials/lanes trials
// in turn.
func crash(s *system, prefix string, trials, lanes int) *crashResult {
	r := &crashResult{}
	var mu sync.Mutex
	inLanes(trials, lanes, func(l, n int) {
		for i := range n {
			lane := fmt.Sprintf("%s-%d-%d", prefix, l, i)
			fo, det, ok, err := crashTrial(s, lane)
			mu.Lock()
			if err != nil {
				r.errs = append(r.errs, err.Error())
			} else {
				r.failover.add(fo)
				if ok {
					r.detect.add(det)
					r.gap.add(fo - det)
				} else {
					r.undetected++
				}
			}
			mu.Unlock()
		}
	})
	return r
}

func crashTrial(s *system, lane string) (failover, detect time.Duration, detected bool, err error) {
	mode := "idle"
	if s.hasJob {
		mode = "hold"
	}
	a, err := s.launch(lane, lane+"-a", mode, true)
	if err != nil {
		return 0, 0, false, err
	}
	if !waitCh(a.led, 60*time.Second) {
		a.stop()
		return 0, 0, false, fmt.Errorf("%s: leader not elected", lane)
	}
	if s.hasJob && !waitCh(a.running, 5*time.Second) {
		a.stop()
		return 0, 0, false, fmt.Errorf("%s: job not running", lane)
	}
	b, err := s.launch(lane, lane+"-b", "idle", true)
	if err != nil {
		a.stop()
		return 0, 0, false, err
	}
	defer b.stop()
	// Let b settle into waiting, and cut at a random phase of a's renewals.
	time.Sleep(jitter(300*time.Millisecond, s.ttl/3))
	t0 := time.Now()
	a.cut()
	limit := 3*s.ttl + 30*time.Second
	if !waitCh(b.led, limit) {
		a.kill()
		return 0, 0, false, fmt.Errorf("%s: no failover within %v", lane, limit)
	}
	failover = b.ledAt.Sub(t0)
	if waitCh(a.lost, s.ttl+5*time.Second) {
		detect, detected = a.lostAt.Sub(t0), true
	}
	a.kill()
	return failover, detect, detected, nil
}

// inLanes shares trials out among lanes lanes (the last may get fewer, a
// lane none) and runs f(l, n) for each lane l that has n > 0 trials, all
// lanes at once. It returns when every f has returned.
func inLanes(trials, lanes int, f func(l, n int)) {
	var wg sync.WaitGroup
	per := (trials + lanes - 1) / lanes
	for l := range lanes {
		n := min(per, trials-l*per)
		if n <= 0 {
			break
		}
		wg.Go(func() { f(l, n) })
	}
	wg.Wait()
}
