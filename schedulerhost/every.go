package schedulerhost

import (
	"fmt"
	"strings"
	"time"
)

// Interval schedules ("@every").
//
// The ticks of "@every D" are the instants that are a whole multiple of D
// after 1970-01-01T00:00:00Z; those of "@every D offset O" are O later.
// They depend on nothing but the spec: not on when a term began, when the
// Host was built, or what the ledger holds. So every instance, in every
// term, computes the same ticks, whether or not the job ever ran, across
// handovers, crashes, restarts and reloads, and the ticks missed while
// nobody led are epoch ticks too, to which catch-up applies the job's
// Misfire policy. (Counting from the last claimed tick instead would make
// the ticks due in a past window depend on the ledger's history.)
//
// robfig/cron's own @every counts from wherever its Next is first called,
// so each new leader would restart the phase, and a job whose interval is
// longer than a leader's tenure would never run. ParseSchedule therefore
// reads @every itself (parseEvery).

// EverySchedule is the schedule of an "@every" spec: a tick at every
// instant whose time since 1970-01-01T00:00:00Z, less Offset, is a whole
// multiple of Every. ParseSchedule returns it for "@every Every" and
// "@every Every offset Offset"; Every is whole seconds, at least one, and
// Offset whole seconds in [0, Every).
type EverySchedule struct {
	Every  time.Duration
	Offset time.Duration
}

// Next returns the first tick strictly after t, in t's location.
func (s EverySchedule) Next(t time.Time) time.Time {
	d, o := int64(s.Every/time.Second), int64(s.Offset/time.Second)
	if d <= 0 {
		return time.Time{}
	}
	// The last tick at or before t's whole second, in whole seconds: its
	// successor is after t, since t is less than a second past it.
	k := t.Unix() - o
	q := k / d
	if k%d < 0 {
		q-- // floor, for instants before the epoch's phase
	}
	return time.Unix((q+1)*d+o, 0).In(t.Location())
}

// everyPrefix starts an interval spec.
const everyPrefix = "@every"

// parseEvery parses spec if it is an interval spec ("@every ...", after an
// optional TZ= or CRON_TZ= zone, which it refuses); ok is false for any
// other spec. Errors name the part of the spec at fault and its value.
func parseEvery(spec string) (s EverySchedule, ok bool, err error) {
	fields := strings.Fields(spec)
	var zone string
	if len(fields) > 0 && (strings.HasPrefix(fields[0], "TZ=") || strings.HasPrefix(fields[0], "CRON_TZ=")) {
		zone, fields = fields[0], fields[1:]
	}
	if len(fields) == 0 || fields[0] != everyPrefix {
		return s, false, nil
	}
	if zone != "" {
		return s, true, fmt.Errorf("zone %q: not allowed with @every, whose ticks are whole multiples of the interval since 1970-01-01T00:00:00Z whatever the zone (use offset, or a cron spec for times of day)", zone)
	}
	args := fields[1:]
	if len(args) != 1 && (len(args) != 3 || args[1] != "offset") {
		return s, true, fmt.Errorf("want \"@every INTERVAL\" or \"@every INTERVAL offset OFFSET\" (such as \"@every 2h offset 15m\"), got %q", strings.Join(fields, " "))
	}
	if s.Every, err = everyDuration("interval", args[0]); err != nil {
		return s, true, err
	}
	if s.Every <= 0 {
		return s, true, fmt.Errorf("@every interval %q: must be positive", args[0])
	}
	if len(args) == 3 {
		if s.Offset, err = everyDuration("offset", args[2]); err != nil {
			return s, true, err
		}
		if s.Offset < 0 {
			return s, true, fmt.Errorf("@every offset %q: must not be negative", args[2])
		}
		if s.Offset >= s.Every {
			return s, true, fmt.Errorf("@every offset %q: must be shorter than the interval (%v)", args[2], s.Every)
		}
	}
	return s, true, nil
}

// everyDuration parses the value v of an @every spec's part (interval or
// offset): a Go duration of whole seconds.
func everyDuration(part, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("@every %s %q: not a duration such as 90s, 15m or 2h", part, v)
	}
	if d%time.Second != 0 {
		return 0, fmt.Errorf("@every %s %q: must be a whole number of seconds", part, v)
	}
	return d, nil
}
