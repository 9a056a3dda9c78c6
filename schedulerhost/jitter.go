package schedulerhost

import (
	"encoding/binary"
	"hash/fnv"
	"time"

	"github.com/robfig/cron/v3"
)

// Jitter: a run of a job with Job.Jitter starts JitterDelay after its
// nominal tick (gateStep). The delay depends only on the job's name, the
// tick and Jitter, so every instance computes the same one: a new leader
// that takes over during the wait waits the same delay, or, the tick
// being in its past, treats it as a missed tick (catch-up). The run
// claims its tick after the wait, so a failover during the wait leaves
// the tick unclaimed; the tick keeps its nominal time, in the ledger and
// in TickFromContext. A run waiting is in flight (overlap policy, drain)
// but does not hold up the claims of the other runs of its instant
// (batch.go): it tells the claim queue at once that it will not claim
// now. The wait ends early when the term ends or starts stopping; the
// run then does not start. Catch-up runs, claimed before they start, do
// not wait, and a run that starts late (a queued tick) waits only what is
// left of tick + delay. The pauses are read after the wait (control.go):
// a pause acknowledged during it stops the run.

// JitterDelay is the delay, in [0, jitter), of the run of job at tick: the
// FNV-1a 64-bit hash of the job's name, a zero byte and the tick's Unix
// time in nanoseconds (8 bytes, big-endian), modulo jitter. Zero if
// jitter is not positive.
func JitterDelay(job string, tick time.Time, jitter time.Duration) time.Duration {
	if jitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(job))
	var b [9]byte
	binary.BigEndian.PutUint64(b[1:], uint64(tick.UnixNano()))
	h.Write(b[:])
	return time.Duration(h.Sum64() % uint64(jitter))
}

// jitterWait is how long r waits before its claim: what is left of its
// tick's jitter delay, by the wall clock, at most the delay itself (a
// wall clock stepped back does not lengthen it). Zero for a run claimed
// already (catch-up) or a job without Jitter. It sets r.delay.
func (r *tickRun) jitterWait() time.Duration {
	j := r.job
	if j.Jitter <= 0 || r.claimed || r.tick.CatchUp {
		return 0
	}
	r.delay = JitterDelay(j.Name, r.tick.Time, j.Jitter)
	left := r.tick.Time.Add(r.delay).Sub(r.t.h.wallNow())
	return max(0, min(left, r.delay))
}

// sampledTicks bounds how many ticks of a schedule minGap walks.
const sampledTicks = 1000

// minGap is the shortest gap between ticks of s: the delay of an @every
// schedule, else the shortest among its first sampledTicks ticks after a
// fixed instant (zero if it has fewer than two).
func minGap(s cron.Schedule) time.Duration {
	if e, ok := s.(EverySchedule); ok {
		return e.Every
	}
	var gap time.Duration
	prev := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for range sampledTicks {
		next := s.Next(prev)
		if prev.IsZero() || next.IsZero() {
			break
		}
		if d := next.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = next
	}
	return gap
}

// validateJitter adds to Validate's errors that of j's Jitter.
func validateJitter(where string, j Job, add func(format string, args ...any)) {
	if j.Jitter < 0 {
		add("%s: Jitter %v: must not be negative", where, j.Jitter)
		return
	}
	if j.Jitter == 0 {
		return
	}
	s, err := ParseSchedule(j.Schedule)
	if err != nil {
		return // reported with Schedule
	}
	if gap := minGap(s); gap > 0 && j.Jitter >= gap {
		add("%s: Jitter %v: must be shorter than the shortest gap between the schedule's ticks (%v)", where, j.Jitter, gap)
	}
}
