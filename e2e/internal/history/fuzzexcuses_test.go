package history

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// excuseInjections are lost ticks dressed up with an excuse the records
// do not back: FuzzCheck must report each as a lost tick.
var excuseInjections = []injection{
	{"skip-unbacked", func(r *rand.Rand, in *Input) bool {
		// A scheduled run goes, and its term logs "still going" for it
		// although its instance's run before had ended.
		i := pick(r, len(in.Starts), func(i int) bool { return removable(in, i) })
		if i < 0 {
			return false
		}
		s := in.Starts[i]
		dropStart(in, i)
		in.Misfires = append(in.Misfires, Misfire{Instance: s.Instance, Token: s.Token, Job: s.Job, Tick: s.Tick, At: s.Tick.Add(time.Millisecond), Reason: StillGoing})
		return true
	}, func(rep Report) int { return rep.LostTicks }},
	{"claimed-by-nobody", func(r *rand.Rand, in *Input) bool {
		// A scheduled run goes, and its term logs "already claimed"
		// although no earlier term was live at the tick.
		i := pick(r, len(in.Starts), func(i int) bool {
			if !removable(in, i) {
				return false
			}
			s := in.Starts[i]
			for _, tm := range in.Terms {
				if tm.Token < s.Token && !tm.Stop.Before(s.Tick.Add(-in.Slack)) {
					return false
				}
			}
			return true
		})
		if i < 0 {
			return false
		}
		s := in.Starts[i]
		dropStart(in, i)
		in.Misfires = append(in.Misfires, Misfire{Instance: s.Instance, Token: s.Token, Job: s.Job, Tick: s.Tick, At: s.Tick.Add(time.Millisecond), Reason: AlreadyClaimed})
		return true
	}, func(rep Report) int { return rep.LostTicks }},
	{"claim-read-from-silence", func(r *rand.Rand, in *Input) bool {
		// A killed term's last run goes (its claim may have landed), and
		// the next term logs no reading of the job's last claim.
		i := pick(r, len(in.Starts), func(i int) bool {
			s := in.Starts[i]
			tm := termOf(in, s.Token)
			return !s.CatchUp && tm.Killed && s.Tick.Add(time.Second).After(tm.Stop) && !s.Tick.After(in.To) && nextStart(in, s.Token) != nil
		})
		if i < 0 {
			return false
		}
		s := in.Starts[i]
		dropStart(in, i)
		in.LastClaims = slices.DeleteFunc(in.LastClaims, func(c LastClaim) bool { return c.Token > s.Token })
		return true
	}, func(rep Report) int { return rep.LostTicks }},
	{"frozen-and-survived", func(r *rand.Rand, in *Input) bool {
		// A scheduled run goes while its instance was frozen, and the term
		// led on past the wake with nobody after it by then.
		i := pick(r, len(in.Starts), func(i int) bool {
			s := in.Starts[i]
			tm := termOf(in, s.Token)
			wake := s.Tick.Add(300 * time.Millisecond)
			if !removable(in, i) || (!tm.Stop.IsZero() && !tm.Stop.After(wake)) {
				return false
			}
			n := nextStart(in, s.Token)
			return n == nil || termOf(in, n.Token).Start.After(wake)
		})
		if i < 0 {
			return false
		}
		s := in.Starts[i]
		dropStart(in, i)
		in.Frozen = append(in.Frozen, Interval{Instance: s.Instance, From: s.Tick.Add(-50 * time.Millisecond), To: s.Tick.Add(200 * time.Millisecond)})
		return true
	}, func(rep Report) int { return rep.LostTicks }},
	{"in-flight-too-long", func(r *rand.Rand, in *Input) bool {
		// A killed term's scheduled run goes, with a retry of its claim
		// logged, though the kill came past the claim timeout.
		i := pick(r, len(in.Starts), func(i int) bool {
			tm := termOf(in, in.Starts[i].Token)
			return removable(in, i) && tm.Killed && tm.Stop.After(in.Starts[i].Tick.Add(in.ClaimTimeout+in.Slack))
		})
		if i < 0 {
			return false
		}
		s := in.Starts[i]
		dropStart(in, i)
		in.Asked = append(in.Asked, Misfire{Instance: s.Instance, Token: s.Token, Job: s.Job, Tick: s.Tick, At: s.Tick.Add(time.Second)})
		return true
	}, func(rep Report) int { return rep.LostTicks }},
}

// apply puts inj into a copy of in and checks it; false if in has no
// place for it.
func (inj injection) apply(r *rand.Rand, in Input) (Input, Report, bool) {
	bad := clone(in)
	if !inj.inject(r, &bad) {
		return bad, Report{}, false
	}
	if inj.kind != "term-overlap" { // it sets its own records
		bad.Records = records(bad.Starts, bad.Ends)
	}
	return bad, Check(bad), true
}

// removable reports whether start i may go as a lost tick: a scheduled
// run in the window, not the last of a term killed before the job's next
// tick, nor the term's only scheduled run.
func removable(in *Input, i int) bool {
	s := in.Starts[i]
	tm := termOf(in, s.Token)
	if s.CatchUp || s.Tick.After(in.To) || (tm.Killed && !tm.Stop.After(s.Tick.Add(time.Second))) {
		return false
	}
	for j, o := range in.Starts {
		if j != i && o.Token == s.Token && !o.CatchUp {
			return true
		}
	}
	return false
}

// dropStart removes start i and its end.
func dropStart(in *Input, i int) {
	in.Starts = slices.Delete(in.Starts, i, i+1)
	in.Ends = slices.Delete(in.Ends, i, i+1)
}

// Every injection finds a place in some generated histories, and is
// reported there: none is a fault FuzzCheck never puts in.
func TestInjectionsApply(t *testing.T) {
	applied := map[string]int{}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, seed*7919))
		in := genHistory(r, 1+int(seed%6))
		for _, inj := range slices.Concat(injections, excuseInjections) {
			if bad, got, ok := inj.apply(r, in); ok {
				if inj.count(got) == 0 {
					t.Fatalf("seed %d: %s injected, not reported: %v\nterms %+v", seed, inj.kind, got.Violations, bad.Terms)
				}
				applied[inj.kind]++
			}
		}
	}
	for _, inj := range slices.Concat(injections, excuseInjections) {
		if applied[inj.kind] == 0 {
			t.Errorf("%s: no place in 300 histories", inj.kind)
		}
	}
	t.Logf("injected in 300 histories: %v", applied)
}
