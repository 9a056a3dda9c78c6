package main

import (
	"fmt"
	"slices"
	"time"
)

// dist is a set of samples of one measurement.
type dist struct {
	s []time.Duration
}

func (d *dist) add(v ...time.Duration) { d.s = append(d.s, v...) }
func (d dist) n() int                  { return len(d.s) }

// q returns the nearest-rank quantile p (0 < p <= 1).
func (d dist) q(p float64) time.Duration {
	if len(d.s) == 0 {
		return 0
	}
	s := slices.Clone(d.s)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	i = max(0, min(i, len(s)-1))
	return s[i]
}
func (d dist) p50() time.Duration { return d.q(0.50) }
func (d dist) p99() time.Duration { return d.q(0.99) }
func (d dist) max() time.Duration { return d.q(1) }
func (d dist) min() time.Duration {
	if len(d.s) == 0 {
		return 0
	}
	return slices.Min(d.s)
}

// fmtDur prints a duration with three significant digits in ms or s.
func fmtDur(v time.Duration) string {
	neg := ""
	if v < 0 {
		neg, v = "-", -v
	}
	ms := float64(v) / float64(time.Millisecond)
	switch {
	case v == 0:
		return "0"
	case ms < 0.1:
		return fmt.Sprintf("%s%.0f µs", neg, float64(v)/float64(time.Microsecond))
	case ms < 10:
		return fmt.Sprintf("%s%.2f ms", neg, ms)
	case ms < 100:
		return fmt.Sprintf("%s%.1f ms", neg, ms)
	case ms < 1000:
		return fmt.Sprintf("%s%.0f ms", neg, ms)
	default:
		return fmt.Sprintf("%s%.2f s", neg, ms/1000)
	}
}

// triple is "p50 / p99 / max".
func (d dist) triple() string {
	if d.n() == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s / %s", fmtDur(d.p50()), fmtDur(d.p99()), fmtDur(d.max()))
}

// ratio is "a/b" of p50 and p99 as "0.95× / 1.10×".
func ratio(a, b dist) string {
	if a.n() == 0 || b.n() == 0 || b.p50() == 0 || b.p99() == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s", fmtRatio(float64(a.p50())/float64(b.p50())), fmtRatio(float64(a.p99())/float64(b.p99())))
}

func fmtRatio(r float64) string {
	switch {
	case r < 0.01:
		return fmt.Sprintf("%.4f×", r)
	case r < 0.1:
		return fmt.Sprintf("%.3f×", r)
	case r < 10:
		return fmt.Sprintf("%.2f×", r)
	default:
		return fmt.Sprintf("%.0f×", r)
	}
}
