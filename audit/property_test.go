package audit

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

var kinds = []struct {
	c Class
	r Reason
}{
	{Ran, ReasonOK}, {Ran, ReasonOK}, {Ran, ReasonOK}, {Ran, ReasonFailed}, {Skipped, ReasonPaused},
	{Covered, ReasonCatchUp}, {Missed, ReasonNoLeader}, {Refused, ReasonStaleTerm}, {Lost, ReasonOutcomeUnknown},
}

var results = []ledger.Result{ledger.ResultOK, ledger.ResultFailed, ledger.ResultUnknown, ledger.ResultRunning, ledger.ResultSkipped, ledger.ResultTimeout}

// randomInput is an account of an hour of a job every 10 s (15 s from a
// random instant, half the time): random ranges added in random order,
// the oldest folded, gaps with history, random terms and window.
func randomInput(t *testing.T, rng *rand.Rand) Input {
	a := Account{Job: "p", Specs: []Spec{{At: t0, Schedule: "@every 10s"}}}
	if rng.IntN(2) == 0 {
		a.SetSpec(Spec{At: sec(rng.IntN(3600)), Schedule: "@every 15s"})
	}
	in := Input{Account: a}
	next := dueNext(t, in)
	var rs []Range
	var hist []ledger.Run
	for c := t0; c.Before(sec(3600)); {
		n := 1 + rng.IntN(40)
		first, last := c, c
		for range n - 1 {
			last = next(last)
		}
		c = next(last)
		if rng.IntN(4) == 0 { // a gap: history for some of its ticks
			for k := first; !k.After(last); k = next(k) {
				if rng.IntN(3) == 0 {
					hist = append(hist, ledger.Run{Job: "p", Tick: k, Token: uint64(rng.IntN(3)), Result: results[rng.IntN(len(results))]})
				}
			}
			continue
		}
		k := kinds[rng.IntN(len(kinds))]
		rs = append(rs, Range{Class: k.c, Reason: k.r, First: first, Last: last, Count: int64(n), Token: uint64(rng.IntN(3))})
	}
	rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
	for _, r := range rs {
		a.Add(r, next)
	}
	if fold := rng.IntN(len(a.Ranges) / 2); fold > 0 {
		a.Folded = map[Class]int64{}
		for _, r := range a.Ranges[:fold] {
			a.Folded[r.Class] += r.Count
		}
		a.FoldedThrough, a.Ranges = a.Ranges[fold-1].Last, a.Ranges[fold:]
	}
	var terms []control.Term
	for i, at := range []int{rng.IntN(1200), 1200 + rng.IntN(1200), 2400 + rng.IntN(1200)} {
		tm := control.Term{Token: uint64(i + 1), Started: sec(at)}
		if i < 2 || rng.IntN(2) == 0 {
			tm.Ended = tm.Started.Add(time.Duration(rng.IntN(1200)) * time.Second)
		}
		terms = append(terms, tm)
	}
	from := sec(rng.IntN(4000) - 200)
	return Input{Account: a, History: hist, Terms: terms, From: from, To: from.Add(time.Duration(rng.IntN(4000)) * time.Second),
		Lag: time.Duration(rng.IntN(60)) * time.Second, Schedules: schedules}
}

// oracle classifies each due tick of in's window one by one, as Compute
// says it does.
func oracle(t *testing.T, in Input) (counts map[Count]bool, folded int64, perTick map[time.Time]Range) {
	next := dueNext(t, in)
	hist := map[time.Time]ledger.Run{}
	for _, h := range in.History {
		hist[h.Tick] = h
	}
	totals := map[[2]string]int64{}
	perTick = map[time.Time]Range{}
	a := in.Account
tick:
	for c := next(in.From); !c.IsZero() && !c.After(in.To); c = next(c) {
		for _, r := range a.Ranges {
			if !c.Before(r.First) && !c.After(r.Last) {
				totals[[2]string{string(r.Class), string(r.Reason)}]++
				perTick[c] = r
				continue tick
			}
		}
		if !a.FoldedThrough.IsZero() && !c.After(a.FoldedThrough) {
			folded++
			continue
		}
		r := Range{}
		switch h, ok := hist[c]; {
		case ok:
			r.Class, r.Reason = Classify(h)
		case in.To.Sub(c) < in.Lag:
			r.Class, r.Reason = Pending, ReasonNotWritten
		default:
			r.Class, r.Reason = Missed, ReasonUnaccounted
			if _, _, nobody := nobodyLed(in.Terms, c); nobody {
				r.Reason = ReasonNoLeader
			}
		}
		totals[[2]string{string(r.Class), string(r.Reason)}]++
		perTick[c] = r
	}
	counts = map[Count]bool{}
	for k, n := range totals {
		counts[Count{Class(k[0]), Reason(k[1]), n}] = true
	}
	return counts, folded, perTick
}

func TestComputeAddsUpOnRandomAccounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 2026))
	for i := range 400 {
		in := randomInput(t, rng)
		checkRanges(t, &in.Account, dueNext(t, in))
		rep := compute(t, in) // checkReport: the sums, and NotOK's counts
		counts, folded, perTick := oracle(t, in)
		got := map[Count]bool{}
		for _, c := range rep.Counts {
			got[c] = true
		}
		if len(got) != len(counts) || rep.Folded != folded {
			t.Fatalf("case %d: Counts %v, folded %d; tick by tick: %v, folded %d", i, rep.Counts, rep.Folded, counts, folded)
		}
		for c := range counts {
			if !got[c] {
				t.Fatalf("case %d: Counts %v, folded %d; tick by tick: %v, folded %d", i, rep.Counts, rep.Folded, counts, folded)
			}
		}
		// NotOK lists every tick that did not run ok, with its class.
		next := dueNext(t, in)
		listed := 0
		for _, r := range rep.NotOK {
			for c := r.First; !c.After(r.Last); c = next(c) {
				listed++
				if w := perTick[c]; w.Class != r.Class || w.Reason != r.Reason {
					t.Fatalf("case %d: NotOK lists tick %s as %s/%s, tick by tick it is %s/%s", i, rel(c), r.Class, r.Reason, w.Class, w.Reason)
				}
			}
		}
		notOK := 0
		for _, r := range perTick {
			if r.Class != Ran || r.Reason != ReasonOK {
				notOK++
			}
		}
		if listed != notOK {
			t.Fatalf("case %d: NotOK lists %d ticks, %d did not run ok", i, listed, notOK)
		}
	}
}
