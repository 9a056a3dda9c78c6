package main

import (
	"fmt"
	"time"
)

// idleResult is the requests per minute one leader and one follower sent.
type idleResult struct {
	leader, follower map[string]float64
	window           time.Duration
	err              error
}

// idleLoad starts a leader (no job due) and a follower, each behind its
// own counting proxy, waits warm, then counts the requests each sends
// during window.
func idleLoad(s *system, lane string, warm, window time.Duration) (r idleResult) {
	r.window = window
	l, err := s.launch(lane, lane+"-leader", "idle", true)
	if err != nil {
		r.err = err
		return r
	}
	defer l.stop()
	if !waitCh(l.led, 60*time.Second) {
		r.err = fmt.Errorf("%s: no leader", s.name)
		return r
	}
	f, err := s.launch(lane, lane+"-follower", "idle", true)
	if err != nil {
		r.err = err
		return r
	}
	defer f.stop()
	time.Sleep(warm)
	l0, f0 := l.counts(), f.counts()
	time.Sleep(window)
	l1, f1 := l.counts(), f.counts()
	if waitCh(f.led, 0) {
		r.err = fmt.Errorf("%s: the follower became leader during the window", s.name)
	}
	r.leader, r.follower = perMinute(l0, l1, window), perMinute(f0, f1, window)
	return r
}

func perMinute(a, b map[string]int64, window time.Duration) map[string]float64 {
	m := map[string]float64{}
	for _, k := range kinds {
		m[k] = float64(b[k]-a[k]) * float64(time.Minute) / float64(window)
	}
	return m
}

func total(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}
