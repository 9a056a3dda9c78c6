package audit

import (
	"testing"
	"time"
)

// dayOfSeconds is the account of a job every second from t0-24h through
// t0+24h, run ok by one term but for 30 failed ticks at failAt(i).
func dayOfSeconds(failAt func(i int) time.Time) Account {
	next := every(time.Second)
	a := Account{Job: "every-second", Specs: []Spec{{At: t0.Add(-24 * time.Hour), Schedule: "@every 1s"}}}
	okr := span(next, Ran, ReasonOK, t0.Add(-24*time.Hour), t0.Add(24*time.Hour))
	okr.Token, okr.Instance = 7, "a"
	a.Ranges = []Range{okr}
	for i := range 30 {
		at := failAt(i)
		// Split the ok range around the failed tick, as the ticks came.
		last := a.Ranges[len(a.Ranges)-1]
		before, after := last, last
		before.Last, before.Count = at.Add(-time.Second), int64(at.Sub(last.First)/time.Second)
		after.First, after.Count = at.Add(time.Second), int64(last.Last.Sub(at)/time.Second)
		fail := Range{Class: Ran, Reason: ReasonFailed, First: at, Last: at, Count: 1, Token: 7, Instance: "a", Attempts: 3, Error: "exit status 1"}
		a.Ranges = append(a.Ranges[:len(a.Ranges)-1], before, fail, after)
	}
	return a
}

// BenchmarkCompute_DayEverySecond: Compute over the 24 h window (t0,
// t0+24h] of a job every second, 30 failed ticks in it.
//   - inside: the window starts with a range (the failed ticks spread
//     through the day), so every range is in it whole;
//   - cut: the ok range before the first failure began a day before the
//     window (the 30 failures in its last hour): 23 h of its ticks are
//     in the window.
func BenchmarkCompute_DayEverySecond(b *testing.B) {
	spread := dayOfSeconds(func(i int) time.Time { return t0.Add(time.Duration(i+1) * 46 * time.Minute) })
	// Start the account at the window, as when the term began then.
	spread.Ranges[0].First, spread.Ranges[0].Count = t0.Add(time.Second), int64(spread.Ranges[0].Last.Sub(t0)/time.Second)
	late := dayOfSeconds(func(i int) time.Time { return t0.Add(23*time.Hour + time.Duration(i+1)*time.Minute) })
	for _, c := range []struct {
		name string
		a    Account
	}{{"inside", spread}, {"cut", late}} {
		b.Run(c.name, func(b *testing.B) {
			in := Input{Account: c.a, From: t0, To: t0.Add(24 * time.Hour), Lag: 20 * time.Second, Schedules: schedules}
			rep, err := Compute(in)
			if err != nil {
				b.Fatal(err)
			}
			if rep.Due != 86400 || rep.Classes[Ran] != 86400 || len(rep.NotOK) != 30 {
				b.Fatalf("due %d, classes %v, %d not ok; want 86400 ran, 30 not ok", rep.Due, rep.Classes, len(rep.NotOK))
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compute(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
