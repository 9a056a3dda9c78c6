package schedulerhost

import (
	"time"
	_ "time/tzdata" // zones load in a minimal container without zoneinfo (about 450 kB)

	"github.com/robfig/cron/v3"
)

// Time zones and DST (see the package doc).
//
// A cron spec names local wall times; a tick is an instant. Where a zone
// has one offset the two map one to one, and robfig/cron's Next is
// exact. At a transition they do not: robfig/cron v3 skips a wall time
// that a spring-forward skips, and fires twice one that a fall-back
// repeats (TestRobfigCron_DST). dstSchedule applies baton's policy
// instead:
//
//   - A spec whose hour field matches every hour ("*" hour, such as
//     "0 * * * *" or "*/5 * * * *") ticks at every instant whose wall
//     time matches: both 01:00 EDT and 01:00 EST at a fall-back (each a
//     real hour), none in a spring-forward gap (the hour before and after
//     the gap is a real hour too).
//   - Any other spec is at fixed times of day: a matching wall time in a
//     spring-forward gap ticks once, at the first instant after the gap
//     (02:30 New York ticks at 03:00 EDT; several matches in the gap make
//     one tick); a wall time repeated by a fall-back ticks once, at its
//     first occurrence.
//   - @every specs are not robfig's: ParseSchedule reads them itself
//     (every.go), as elapsed time from the Unix epoch, which no zone
//     changes.
//
// Next is a function of the instant alone (and the zone), so ticks are
// strictly increasing and any leader computes the same ones from the
// ledger's last claimed tick.
type dstSchedule struct {
	spec *cron.SpecSchedule // as parsed: Location is the CRON_TZ= zone, or time.Local for none
	// wall is spec read on naive wall times: its clock fields are the
	// local ones, in UTC, where no transition happens.
	wall      cron.SpecSchedule
	everyHour bool
}

const allHours = 1<<24 - 1

// maxZonePeriods bounds the zone periods (intervals of one offset) a Next
// walks through, whatever the zone's rules.
const maxZonePeriods = 1000

// withDSTPolicy wraps a parsed schedule with baton's DST policy.
func withDSTPolicy(s cron.Schedule) cron.Schedule {
	sp, ok := s.(*cron.SpecSchedule)
	if !ok {
		return s
	}
	w := *sp
	w.Location = time.UTC
	return &dstSchedule{spec: sp, wall: w, everyHour: sp.Hour&allHours == allHours}
}

// wallNext is the first instant after t whose wall time at offset off
// matches the spec, read as if the offset never changed (zero if none
// within robfig's five years).
func (s *dstSchedule) wallNext(t time.Time, off time.Duration) time.Time {
	n := s.wall.Next(t.UTC().Add(off))
	if n.IsZero() {
		return n
	}
	return n.Add(-off)
}

func offset(t time.Time, loc *time.Location) time.Duration {
	_, off := t.In(loc).Zone()
	return time.Duration(off) * time.Second
}

// Next returns the first tick after t, in t's location; zero if none
// within five years.
func (s *dstSchedule) Next(t time.Time) time.Time {
	loc := s.spec.Location
	if loc == time.Local {
		loc = t.Location() // as robfig: a spec without CRON_TZ= is read in t's zone
	}
	limit := t.AddDate(5, 0, 0)
	// The first tick after `after`, looked for in the zone period that
	// holds `at` (at is after, or the start of the next period).
	after, at := t, t
	for range maxZonePeriods {
		if at.After(limit) {
			break
		}
		lt := at.In(loc)
		off := offset(lt, loc)
		start, end := lt.ZoneBounds()
		c := s.wallNext(after, off)
		if !c.IsZero() && (end.IsZero() || c.Before(end)) {
			if !s.everyHour && !start.IsZero() {
				// Fall-back at start: the wall times of its first back
				// span came first in the period before, and ticked there.
				if back := offset(start.Add(-time.Nanosecond), loc) - off; back > 0 && c.Before(start.Add(back)) {
					after = start.Add(back - time.Nanosecond)
					at = after
					continue
				}
			}
			return c.In(t.Location())
		}
		if end.IsZero() {
			break
		}
		if gap := offset(end, loc) - off; !s.everyHour && gap > 0 {
			// Spring-forward at end: the wall times [end+off, end+off+gap)
			// do not exist. If one matches, tick once at end.
			g := s.wall.Next(end.UTC().Add(off - time.Nanosecond))
			if !g.IsZero() && g.Before(end.UTC().Add(off+gap)) {
				return end.In(t.Location())
			}
		}
		after, at = end.Add(-time.Nanosecond), end
	}
	return time.Time{}
}
