package audit

import (
	"slices"
	"time"

	"github.com/batonhq/baton/ledger"
)

// withOutcomes returns a with each settled entry of history (a run or a
// lost tick) recorded in place of a range's record of its tick that
// ranks below it (a skip, a refusal, a miss, a cover), as the leader's
// next write of a would record it (Add). So a record of a term that was
// already over when it made it (a late note, or a write that raced the
// next term's fence) never hides the run a later term made of the tick,
// before or after that term writes it. a is not changed: its Ranges are
// copied once one is replaced.
func withOutcomes(a Account, history []ledger.Run, sched Schedules) Account {
	copied := false
	for _, h := range history {
		if h.RequestID != "" {
			continue
		}
		c, why := Classify(h)
		if rank(c) < rank(Ran) {
			continue
		}
		i, ok := holding(a.Ranges, h)
		if !ok || rank(a.Ranges[i].Class) >= rank(c) {
			continue
		}
		next := nextOf(a.Specs, h, sched)
		if next == nil {
			continue
		}
		if !copied {
			a.Ranges, copied = slices.Clone(a.Ranges), true
		}
		r := Range{Class: c, Reason: why, First: h.Tick, Last: h.Tick, Count: 1, Token: h.Token,
			Instance: h.Instance, Attempts: h.Attempts, Error: h.Error}
		if !h.Started.IsZero() && h.Started.After(h.Tick) {
			r.Late = h.Started.Sub(h.Tick)
		}
		a.Add(r, next)
	}
	return a
}

// holding returns the index of the range of rs that holds h's tick.
func holding(rs []Range, h ledger.Run) (int, bool) {
	i, _ := slices.BinarySearchFunc(rs, h.Tick, func(r Range, t time.Time) int {
		if r.Last.Before(t) {
			return -1
		}
		if r.First.After(t) {
			return 1
		}
		return 0
	})
	return i, i < len(rs) && !rs[i].First.After(h.Tick) && !rs[i].Last.Before(h.Tick)
}

// nextOf returns the ticks of the spec of specs in force at h's tick;
// nil if none is, or it does not parse.
func nextOf(specs []Spec, h ledger.Run, sched Schedules) Next {
	var in *Spec
	for i := range specs {
		if !specs[i].At.After(h.Tick) {
			in = &specs[i]
		}
	}
	if in == nil || sched == nil {
		return nil
	}
	n, err := sched(*in)
	if err != nil {
		return nil
	}
	return n
}
