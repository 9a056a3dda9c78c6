package e2e

import (
	"sync"
	"time"

	"github.com/batonhq/baton/e2e/internal/history"
)

// clockStepMin is the least lead of the wall clock over the monotonic
// clock between two samples that counts as a pause of the machine: half
// of what schedulerhost takes for a step of the wall clock (100 ms), so
// that every step a node sees, the suite sees too.
const clockStepMin = 50 * time.Millisecond

// clockWatch samples the test process's wall and monotonic clocks every
// 20 ms and keeps the spans in which the wall clock ran ahead of the
// monotonic one: the whole machine was paused (a virtual machine's
// snapshot stops the monotonic clock; the wall clock is stepped on the
// wake), or the wall clock was stepped. The checker's evidence of such a
// pause comes from here, outside baton (history.Input.ClockSteps).
type clockWatch struct {
	mu    sync.Mutex
	steps []history.Interval
	stop  chan struct{}
	done  chan struct{}
}

// clocks is the watch over the whole test run (TestMain); nil when the
// fault suite is off.
var clocks *clockWatch

func startClockWatch() *clockWatch {
	w := &clockWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		prev := time.Now()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			now := time.Now()
			if lead := now.Round(0).Sub(prev.Round(0)) - now.Sub(prev); lead > clockStepMin {
				w.mu.Lock()
				w.steps = append(w.steps, history.Interval{From: prev.Round(0), To: now.Round(0)})
				w.mu.Unlock()
			}
			prev = now
		}
	}()
	return w
}

// close stops the watch and waits for its goroutine.
func (w *clockWatch) close() {
	close(w.stop)
	<-w.done
}

// between returns the spans that overlap from..to.
func (w *clockWatch) between(from, to time.Time) []history.Interval {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []history.Interval
	for _, s := range w.steps {
		if s.To.After(from) && s.From.Before(to) {
			out = append(out, s)
		}
	}
	return out
}
