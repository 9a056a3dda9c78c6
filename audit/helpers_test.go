package audit

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// t0 is a whole hour: every period of the tests divides it.
var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// every returns the ticks of a fixed period p since the Unix epoch, as
// the Host's @every does: the first tick strictly after t.
func every(p time.Duration) Next {
	return func(t time.Time) time.Time {
		n := t.UnixNano()
		k := n / int64(p)
		if k*int64(p) <= n {
			k++
		}
		return time.Unix(0, k*int64(p)).UTC()
	}
}

// schedules parses "@every <duration>" and standard five-field cron
// specs, in the spec's zone (UTC if empty).
func schedules(s Spec) (Next, error) {
	if d, ok := strings.CutPrefix(s.Schedule, "@every "); ok {
		p, err := time.ParseDuration(d)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("bad period %q", d)
		}
		return every(p), nil
	}
	sched, err := cron.ParseStandard(s.Schedule)
	if err != nil {
		return nil, err
	}
	loc := time.UTC
	if s.Zone != "" {
		if loc, err = time.LoadLocation(s.Zone); err != nil {
			return nil, err
		}
	}
	return func(t time.Time) time.Time { return sched.Next(t.In(loc)) }, nil
}

// sec is the tick k seconds after t0.
func sec(k int) time.Time { return t0.Add(time.Duration(k) * time.Second) }

// ticks counts the ticks of next from first through last, both
// included (first must be a tick).
func ticks(next Next, first, last time.Time) int64 {
	n := int64(0)
	for c := first; !c.After(last); c = next(c) {
		n++
	}
	return n
}

// span is a range of class c, reason why, of the ticks of next from
// first through last.
func span(next Next, c Class, why Reason, first, last time.Time) Range {
	return Range{Class: c, Reason: why, First: first, Last: last, Count: ticks(next, first, last)}
}

// checkRanges fails t unless a's ranges are oldest first, apart, each
// with Count the number of its ticks, after FoldedThrough.
func checkRanges(t *testing.T, a *Account, next Next) {
	t.Helper()
	for i, r := range a.Ranges {
		if n := ticks(next, r.First, r.Last); n != r.Count {
			t.Errorf("range %d %s..%s: Count %d, want its %d ticks", i, r.First.Format(time.TimeOnly), r.Last.Format(time.TimeOnly), r.Count, n)
		}
		if !a.FoldedThrough.IsZero() && !r.First.After(a.FoldedThrough) {
			t.Errorf("range %d starts at %v, at or before FoldedThrough %v", i, r.First, a.FoldedThrough)
		}
		if i > 0 && !r.First.After(a.Ranges[i-1].Last) {
			t.Errorf("range %d starts at %v, not after range %d's last tick %v", i, r.First, i-1, a.Ranges[i-1].Last)
		}
	}
}

// describe is a's ranges in short: "ran/ok 0-9 (10)" with seconds from t0.
func describe(a *Account) string {
	var b strings.Builder
	for _, r := range a.Ranges {
		fmt.Fprintf(&b, "%s/%s %s-%s (%d) ", r.Class, r.Reason, rel(r.First), rel(r.Last), r.Count)
	}
	return strings.TrimSpace(b.String())
}

func rel(t time.Time) string { return strconv.FormatInt(int64(t.Sub(t0)/time.Second), 10) }
