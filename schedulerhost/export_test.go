package schedulerhost

import (
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
)

// SteppingClock is a clock for tests. Its monotonic clock is the process
// clock (the fake clock inside a testing/synctest bubble); its wall clock
// is the process clock plus an offset that Step moves, as an NTP step or
// `date -s` would.
type SteppingClock struct {
	origin time.Time
	offset atomic.Int64
}

// NewSteppingClock returns a clock whose wall clock agrees with the
// process clock until the first Step.
func NewSteppingClock() *SteppingClock { return &SteppingClock{origin: time.Now()} }

// Step moves the wall clock by d (forward if positive, back if negative);
// the monotonic clock does not move.
func (c *SteppingClock) Step(d time.Duration) { c.offset.Add(int64(d)) }

// Wall reads the wall clock.
func (c *SteppingClock) Wall() time.Time { w, _ := c.now(); return w }

func (c *SteppingClock) now() (time.Time, time.Duration) {
	t := time.Now()
	return t.Round(0).Add(time.Duration(c.offset.Load())), t.Sub(c.origin)
}

func (c *SteppingClock) newTimer(d time.Duration) *time.Timer { return time.NewTimer(d) }

// UseClock makes h read time from c. Call it before Lead.
func (h *Host) UseClock(c *SteppingClock) { h.clock = c }

// ParseUnwrapped parses spec with robfig/cron v3 alone, without baton's
// DST policy, to compare the two.
func ParseUnwrapped(spec string) (cron.Schedule, error) { return specParser.Parse(spec) }
