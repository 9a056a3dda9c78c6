package history

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// clean()'s verdicts, tick by tick: a runs 1..10 (token 10), nobody leads
// at 11 and b's catch-up (token 20, the first term after it) stands for
// it, b runs 12..20.
func TestTicks_Clean(t *testing.T) {
	in := clean()
	in.Ends = []End{{Job: "j", Tick: at(3), Token: 10, Instance: "a", At: at(3.5)}}
	r := Check(in)
	if !r.OK() {
		t.Fatalf("clean: %v", r.Violations)
	}
	if len(r.Ticks) != 20 {
		t.Fatalf("%d verdicts, want 20: %+v", len(r.Ticks), r.Ticks)
	}
	for i, v := range r.Ticks {
		want := TickVerdict{Job: "j", Tick: at(float64(i + 1)), Verdict: VerdictRan, Token: 10, Instance: "a"}
		switch {
		case i+1 == 3:
			want.Ended = true
		case i+1 == 11:
			want.Verdict, want.Reason, want.Token, want.Instance = VerdictAccounted, "catch-up", 20, "b"
		case i+1 > 11:
			want.Token, want.Instance = 20, "b"
		}
		if v != want {
			t.Errorf("tick %d: %+v, want %+v", i+1, v, want)
		}
	}
}

// A tick whose run goes while its term was live is listed as lost, by
// that term, with the finding's detail.
func TestTicks_Lost(t *testing.T) {
	in := clean()
	in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(5)) })
	r := Check(in)
	if r.LostTicks != 1 {
		t.Fatalf("lost ticks %d, want 1: %v", r.LostTicks, r.Violations)
	}
	v := r.Ticks[4]
	if v.Verdict != VerdictLost || !v.Tick.Equal(at(5)) || v.Token != 10 || v.Instance != "a" || v.Reason != r.Violations[0].Detail {
		t.Errorf("tick 5: %+v, want lost by term 10 (a) with the detail %q", v, r.Violations[0].Detail)
	}
}

// On random histories with every injected fault, the verdicts add up to
// the report: one per tick, in order; the accounted ones by reason are
// Accounted; the lost ones are LostTicks; a tick is run exactly when a
// start of it is in the input.
func TestTicks_AddUp(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, seed*31))
		base := genHistory(r, 1+int(seed%6))
		inputs := []Input{base}
		for _, inj := range slices.Concat(injections, excuseInjections) {
			if bad, _, ok := inj.apply(r, base); ok {
				inputs = append(inputs, bad)
			}
		}
		for _, in := range inputs {
			rep := Check(in)
			p := in.Jobs["j"]
			var ticks []time.Time
			for tk := firstTick(p, in.From); !tk.After(in.To); tk = tk.Add(p.Every) {
				ticks = append(ticks, tk)
			}
			if len(rep.Ticks) != len(ticks) {
				t.Fatalf("seed %d: %d verdicts for %d ticks", seed, len(rep.Ticks), len(ticks))
			}
			started := map[int64]bool{}
			for _, s := range in.Starts {
				started[s.Tick.UnixNano()] = true
			}
			accounted := map[string]int{}
			lost := 0
			for i, v := range rep.Ticks {
				if !v.Tick.Equal(ticks[i]) || v.Job != "j" {
					t.Fatalf("seed %d: verdict %d is %s tick %s, want j %s", seed, i, v.Job, v.Tick, ticks[i])
				}
				if (v.Verdict == VerdictRan) != started[v.Tick.UnixNano()] {
					t.Fatalf("seed %d: tick %s: verdict %s, started %v", seed, v.Tick, v.Verdict, started[v.Tick.UnixNano()])
				}
				switch v.Verdict {
				case VerdictAccounted:
					accounted[v.Reason]++
				case VerdictLost:
					lost++
				}
			}
			if lost != rep.LostTicks || !maps.Equal(accounted, rep.Accounted) && (len(accounted) > 0 || len(rep.Accounted) > 0) {
				t.Fatalf("seed %d: verdicts: lost %d, accounted %v; report: lost %d, accounted %v", seed, lost, accounted, rep.LostTicks, rep.Accounted)
			}
		}
	}
}
