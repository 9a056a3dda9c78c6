package audit

import (
	"fmt"
	"slices"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// Input is what Compute reads of one job.
type Input struct {
	Account Account
	// History is the job's newest ledger entries, any order: they
	// classify the ticks the Account does not hold yet.
	History []ledger.Run
	// Terms, if known, say when somebody led: a tick nothing records is
	// missed for no-leader when no term was live at it.
	Terms []control.Term
	// Refusals are leaders' reports of claims the backend refused
	// (lease notes): a tick nothing records, of a refused streak, is
	// refused.
	Refusals []Refusal
	// From and To: the window, ticks after From through To.
	From, To time.Time
	// Now is when the report is made (zero: To). Lag: a tick due within
	// Lag before Now that nothing records yet is
	// pending (the leader writes its Accounts every so often).
	Now       time.Time
	Lag       time.Duration
	Schedules Schedules
}

// Count is how many ticks of a window are in one class for one reason.
type Count struct {
	Class  Class  `json:"class"`
	Reason Reason `json:"reason"`
	Ticks  int64  `json:"ticks"`
}

// SpecChange is a schedule change of the job.
type SpecChange struct {
	At  time.Time `json:"at"`
	Old string    `json:"old,omitempty"`
	New string    `json:"new"`
}

// Report accounts for every due tick of one job in a window: Due is the
// sum of Classes and Folded.
type Report struct {
	Job     string          `json:"job"`
	From    time.Time       `json:"from"`
	To      time.Time       `json:"to"`
	Due     int64           `json:"due"`
	Classes map[Class]int64 `json:"classes"`
	Counts  []Count         `json:"counts"`
	// NotOK lists the ticks that did not run ok, as ranges cut to the
	// window, oldest first: at most MaxListed ranges. Unlisted counts the
	// not-ok ticks past those (they are counted in Classes all the same).
	NotOK    []Range `json:"not_ok"`
	Unlisted int64   `json:"unlisted,omitempty"`
	// Folded is how many due ticks of the window were folded into the
	// Account's counts (at or before FoldedThrough): their class is not
	// known tick by tick, and they are in no class above.
	Folded        int64     `json:"folded,omitempty"`
	FoldedThrough time.Time `json:"folded_through,omitzero"`
	// LastOK is the newest tick that ran ok, in the window or before.
	LastOK time.Time    `json:"last_ok,omitzero"`
	Specs  []SpecChange `json:"specs,omitempty"`
	// Error says what spoiled the report, if anything did (the job's
	// account or history unreadable): its figures are then partial.
	Error string `json:"error,omitempty"`
	// Manual lists the run-now runs of the History asked for in the
	// window, oldest first: they are no due tick.
	Manual []ledger.Run `json:"manual,omitempty"`
}

// Compute classifies each due tick of in's window. A tick is due under
// the Account's spec in force at it, from its first spec's At on. Each
// tick takes the class of the range that holds it, unless its ledger
// entry ranks above it (a run, a lost tick: withOutcomes); else, at or before
// FoldedThrough, it is Folded; else its ledger entry's (Classify); else
// pending within Lag of Now; else missed: no-leader if no term of Terms
// was live at it, unaccounted if one was or none are known.
func Compute(in Input) (Report, error) {
	in.Account = withOutcomes(in.Account, in.History, in.Schedules)
	a := in.Account
	rep := Report{Job: a.Job, From: in.From, To: in.To, Classes: map[Class]int64{}, FoldedThrough: a.FoldedThrough}
	for i, s := range a.Specs {
		c := SpecChange{At: s.At, New: s.Schedule}
		if i > 0 {
			c.Old = a.Specs[i-1].Schedule
		}
		rep.Specs = append(rep.Specs, c)
	}
	for _, r := range a.Ranges {
		if r.Class == Ran && r.Reason == ReasonOK && r.Last.After(rep.LastOK) && !r.Last.After(in.To) {
			rep.LastOK = r.Last
		}
	}
	hist := map[int64]ledger.Run{}
	for _, r := range in.History {
		if r.RequestID != "" {
			if r.Tick.After(in.From) && !r.Tick.After(in.To) {
				rep.Manual = append(rep.Manual, r)
			}
			continue
		}
		hist[r.Tick.UnixNano()] = r
		if r.Result == ledger.ResultOK && r.Tick.After(rep.LastOK) && !r.Tick.After(in.To) {
			rep.LastOK = r.Tick
		}
	}
	slices.SortFunc(rep.Manual, func(x, y ledger.Run) int { return x.Tick.Compare(y.Tick) })
	w := &walker{in: in, rep: &rep, hist: hist, counts: map[[2]string]int64{}}
	if err := w.walk(); err != nil {
		return Report{}, err
	}
	for _, c := range Classes {
		for _, r := range reasonOrder(w.counts, c) {
			rep.Counts = append(rep.Counts, Count{c, r, w.counts[[2]string{string(c), string(r)}]})
		}
	}
	return rep, nil
}

// walker walks a window's due ticks, spec by spec.
type walker struct {
	in     Input
	rep    *Report
	hist   map[int64]ledger.Run
	counts map[[2]string]int64
	ri     int  // the first range that may hold the next tick
	listed bool // the tick walked last is the last of NotOK
}

func (w *walker) walk() error {
	specs := w.in.Account.Specs
	for i, s := range specs {
		from, to := laterOf(w.in.From, s.At.Add(-time.Nanosecond)), w.in.To
		if i+1 < len(specs) && specs[i+1].At.Add(-time.Nanosecond).Before(to) {
			to = specs[i+1].At.Add(-time.Nanosecond)
		}
		if !to.After(from) {
			continue
		}
		next, err := w.in.Schedules(s)
		if err != nil {
			return fmt.Errorf("audit: %s: schedule %q in force from %s: %w", w.in.Account.Job, s.Schedule, s.At.Format(time.RFC3339), err)
		}
		w.span(next, from, to)
	}
	return nil
}

// span classifies the ticks of next after from through to.
func (w *walker) span(next Next, from, to time.Time) {
	rs := w.in.Account.Ranges
	for t := next(from); !t.IsZero() && !t.After(to); t = next(t) {
		for w.ri < len(rs) && rs[w.ri].Last.Before(t) {
			w.ri++
		}
		if w.ri < len(rs) && !t.Before(rs[w.ri].First) {
			r := rs[w.ri]
			if !r.First.Before(t) && !r.Last.After(to) {
				w.add(r, r.Count) // the whole range is in the window
				t = r.Last
				continue
			}
			// The window cuts r: count its ticks from t through the
			// window's end or its own, and add them at once.
			end := r.Last
			if to.Before(end) {
				end = to
			}
			c := r
			c.First, c.Last, c.Count = t, t, 1
			for n := next(t); !n.IsZero() && !n.After(end); n = next(n) {
				c.Last, c.Count = n, c.Count+1
			}
			w.add(c, c.Count)
			t = c.Last
			continue
		}
		if !w.in.Account.FoldedThrough.IsZero() && !t.After(w.in.Account.FoldedThrough) {
			w.rep.Folded++
			w.rep.Due++
			w.listed = false
			continue
		}
		w.add(w.loose(t), 1)
	}
}

// loose classifies tick t that no range holds.
func (w *walker) loose(t time.Time) Range {
	r := Range{First: t, Last: t, Count: 1}
	if h, ok := w.hist[t.UnixNano()]; ok {
		r.Class, r.Reason = Classify(h)
		r.Token, r.Instance, r.Attempts, r.Error = h.Token, h.Instance, h.Attempts, h.Error
		if !h.Started.IsZero() {
			r.Late = max(0, h.Started.Sub(t))
		}
		return r
	}
	now := w.in.Now
	if now.IsZero() {
		now = w.in.To
	}
	if now.Sub(t) < w.in.Lag {
		r.Class, r.Reason = Pending, ReasonNotWritten
		return r
	}
	if f, ok := refusedAt(w.in.Refusals, t); ok {
		r.Class, r.Reason, r.Token, r.Instance, r.Error = Refused, ReasonDenied, f.Token, f.Instance, f.Error
		return r
	}
	r.Class, r.Reason = Missed, ReasonUnaccounted
	if len(w.in.Terms) > 0 {
		if from, until, nobody := nobodyLed(w.in.Terms, t); nobody {
			r.Reason, r.NobodyFrom, r.NobodyUntil = ReasonNoLeader, from, until
		}
	}
	return r
}

// add counts r's n ticks (r cut to the window) and lists them unless
// they ran ok, joining the last listed range when r continues it.
func (w *walker) add(r Range, n int64) {
	w.rep.Due += n
	w.rep.Classes[r.Class] += n
	w.counts[[2]string{string(r.Class), string(r.Reason)}] += n
	listed := w.listed
	w.listed = !(r.Class == Ran && r.Reason == ReasonOK)
	if !w.listed {
		if r.Last.After(w.rep.LastOK) {
			w.rep.LastOK = r.Last // a range cut by the window's end
		}
		return
	}
	if k := len(w.rep.NotOK); listed && k > 0 {
		p := &w.rep.NotOK[k-1]
		if sameRun(*p, r) && (r.Error == "" || p.Error == r.Error) {
			*p = join(*p, r)
			return
		}
	}
	if len(w.rep.NotOK) >= MaxListed {
		w.rep.Unlisted += n
		w.listed = false
		return
	}
	w.rep.NotOK = append(w.rep.NotOK, r)
}

// MaxListed bounds the ranges a Report lists (Report.NotOK): a window of
// ticks that alternate between ok and not makes one range per not-ok
// tick.
const MaxListed = 1000

// reasonOrder returns the reasons counted for class c, in name order.
func reasonOrder(counts map[[2]string]int64, c Class) []Reason {
	var out []Reason
	for k := range counts {
		if k[0] == string(c) {
			out = append(out, Reason(k[1]))
		}
	}
	slices.Sort(out)
	return out
}

// nobodyLed says whether no term of terms was live at t, and if so from
// when (the end of the last term before t) until when (the start of the
// first after it); zero where there is none.
// Terms older than the oldest known are unknown: before it, nobodyLed
// says somebody may have.
func nobodyLed(terms []control.Term, t time.Time) (from, until time.Time, nobody bool) {
	known := false
	for _, tm := range terms {
		known = known || !tm.Started.After(t)
	}
	if !known {
		return time.Time{}, time.Time{}, false
	}
	for _, tm := range terms {
		if tm.Started.After(t) {
			if until.IsZero() || tm.Started.Before(until) {
				until = tm.Started
			}
			continue
		}
		if tm.Ended.IsZero() || tm.Ended.After(t) {
			return time.Time{}, time.Time{}, false
		}
		if tm.Ended.After(from) {
			from = tm.Ended
		}
	}
	return from, until, true
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
