package schedulerhost

import "time"

// clock is where a Host reads time: the wall clock, which names ticks and
// can step (an NTP step, `date -s`, a host that syncs late), and the
// monotonic clock, which measures durations and drives timers. Tests
// replace it (export_test.go).
type clock interface {
	// now reads both clocks at once: the wall clock (without a monotonic
	// reading, so that Sub between two readings is a wall-clock
	// difference) and the monotonic clock (time since an arbitrary
	// origin).
	now() (wall time.Time, mono time.Duration)
	// newTimer returns a timer that fires after d of monotonic time.
	newTimer(d time.Duration) *time.Timer
}

// realClock is the process clock.
type realClock struct{ origin time.Time }

func newRealClock() realClock { return realClock{origin: time.Now()} }

func (c realClock) now() (time.Time, time.Duration) {
	t := time.Now()
	return t.Round(0), t.Sub(c.origin)
}

func (realClock) newTimer(d time.Duration) *time.Timer { return time.NewTimer(d) }

// wallNow reads the wall clock.
func (h *Host) wallNow() time.Time {
	w, _ := h.clock.now()
	return w
}

// Schedule time: the clock the loop fires ticks by.
//
// It follows the wall clock, which names the ticks, with two exceptions.
// It never moves back: when the wall clock steps back, schedule time goes
// on with the monotonic clock from where it was, ahead of the wall clock
// by the step, until the wall clock catches up with it (it steps forward
// again) or the term ends. And a forward step is seen as one: schedule
// time jumps with the wall clock, and the ticks it jumps over are told
// apart from ticks that merely came due (loop, skipOver).
const (
	// stepTolerance is how far the wall clock may move against the
	// monotonic clock between two readings and still be followed as if it
	// had not stepped (the two are read one after the other).
	stepTolerance = 100 * time.Millisecond
	// maxSleep bounds the loop's sleeps, so that a forward step is seen
	// within it even when the next tick is far away.
	maxSleep = time.Minute
)

type schedClock struct {
	c     clock
	at    time.Time     // schedule time at the last reading
	mono  time.Duration // monotonic reading then
	ahead time.Duration // how far at was ahead of the wall clock then
}

func newSchedClock(c clock) *schedClock {
	w, m := c.now()
	return &schedClock{c: c, at: w, mono: m}
}

// read advances schedule time and returns it (now); expected, where it
// would be had the wall clock not stepped (the last reading plus the
// monotonic time since); and the step it found: positive if the wall clock
// jumped forward past expected (now is the wall clock), negative if it
// fell further behind than before (now is expected), else zero.
func (s *schedClock) read() (now, expected time.Time, step time.Duration) {
	w, m := s.c.now()
	expected = s.at.Add(m - s.mono)
	d := w.Sub(expected)
	switch {
	case d > stepTolerance:
		now, step = w, d
	case d >= -stepTolerance:
		now = w
		if now.Before(s.at) {
			now = s.at
		}
	default:
		now = expected
		if -d-s.ahead > stepTolerance {
			step = d + s.ahead
		}
	}
	s.at, s.mono, s.ahead = now, m, now.Sub(w)
	return now, expected, step
}
