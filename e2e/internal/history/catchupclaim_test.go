package history

import (
	"slices"
	"testing"
	"time"
)

// A term killed in its catch-up of job j, while its loop ran another
// job's tick and skipped j's next one for the catch-up run not yet
// begun, is passed over for j to the term after it, which read the
// catch-up's claim (the kube soak, lane 3, term 302). Each change after
// it must be reported lost.
func TestCheck_KilledInThisJobsCatchUp(t *testing.T) {
	base := func() Input {
		in := withOther(clean())
		in.Terms[0].Stop = at(9.5)
		in.Starts = slices.DeleteFunc(in.Starts, func(s Start) bool { return s.Tick.Equal(at(10)) && !s.CatchUp })
		in.Terms = []Term{in.Terms[0], {Instance: "c", Token: 15, Start: at(10.5), Stop: at(11.2), Killed: true}, in.Terms[1]}
		in.Starts = append(in.Starts, Start{Job: "k", Tick: at(11), Token: 15, Instance: "c", At: at(11.001), Line: 90})
		in.Misfires = []Misfire{{Instance: "c", Token: 15, Job: "j", Tick: at(11), At: at(11.001), Reason: StillGoing}}
		in.LastClaims = append(in.LastClaims, LastClaim{Instance: "c", Token: 15, Job: "j", Tick: at(9)})
		return in
	}
	if r := Check(base()); !r.OK() {
		t.Fatalf("c killed in j's catch-up, b read its claim of 10: %v", r.Violations)
	}
	// Others' records of j are not c's loop deciding a tick of j.
	for _, c := range []struct {
		name string
		edit func(in *Input)
	}{
		{"c's earlier term ran j", func(in *Input) {
			in.Terms = append([]Term{{Instance: "c", Token: 3, Start: at(-3), Stop: at(-0.5), Lost: at(-0.5)}}, in.Terms...)
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(-1), Token: 3, Instance: "c", At: at(-0.999), Line: 91})
		}},
		{"c's earlier term logged a tick of j", func(in *Input) {
			in.Terms = append([]Term{{Instance: "c", Token: 3, Start: at(-3), Stop: at(-0.5), Lost: at(-0.5)}}, in.Terms...)
			in.Misfires = append(in.Misfires, Misfire{Instance: "c", Token: 3, Job: "j", Tick: at(11), At: at(-0.6), Reason: "run not started: claim failed"})
		}},
		{"another instance ran j with c's token", func(in *Input) {
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(11), Token: 15, Instance: "x", At: at(11.002), Line: 91})
		}},
		{"another instance logged a tick of j with c's token", func(in *Input) {
			in.Misfires = append(in.Misfires, Misfire{Instance: "x", Token: 15, Job: "j", Tick: at(11), At: at(11.002), Reason: "run not started: claim failed"})
		}},
		{"c's loop logged a tick of k", func(in *Input) {
			in.Misfires = append(in.Misfires, Misfire{Instance: "c", Token: 15, Job: "k", Tick: at(11), At: at(11.002), Reason: "run not started: claim failed"})
		}},
	} {
		in := base()
		c.edit(&in)
		if r := Check(in); lostAt(r, 10) {
			t.Errorf("%s: tick 10 reported lost: %v", c.name, r.Violations)
		}
	}
	for _, c := range []struct {
		name string
		edit func(in *Input)
	}{
		{"b read 9", func(in *Input) { in.LastClaims[0].Tick = at(9) }},
		{"c's loop ran a tick of j", func(in *Input) {
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(11), Token: 15, Instance: "c", At: at(11.002), Line: 91})
		}},
		{"c lived beyond its catch-up's bound", func(in *Input) { in.ClaimTimeout = 200 * time.Millisecond }},
	} {
		in := base()
		c.edit(&in)
		if r := Check(in); !lostAt(r, 10) {
			t.Errorf("%s: tick 10 not reported lost: %v", c.name, r.Violations)
		}
	}
}

// stale is a history in which c, leading after tick 11, has its
// catch-up's claim of 11 refused as stale (its lease lapsed as it asked)
// and ends; b, the term after it, accounts for 11 with its catch-up (the
// kube soak, lane 3, terms 78 and 79).
func stale() Input {
	in := clean()
	in.Terms = []Term{in.Terms[0], {Instance: "c", Token: 15, Start: at(11.5), Stop: at(12), Lost: at(12)}, in.Terms[1]}
	in.Misfires = []Misfire{{Instance: "c", Token: 15, Job: "j", Tick: at(11), At: at(11.9), Reason: StaleRefused}}
	return in
}

func TestCheck_CatchUpRefusedAsStalePassesTheTickOn(t *testing.T) {
	if r := Check(stale()); !r.OK() || r.Accounted["catch-up claim refused as stale, then catch-up"] != 1 {
		t.Fatalf("violations %v, accounted %v; want tick 11 passed on to b's catch-up", r.Violations, r.Accounted)
	}
	for _, c := range []struct {
		name string
		edit func(in *Input)
	}{
		{"b's catch-up does not stand for 11", func(in *Input) { in.Starts[10].CatchUpFrom = at(12) }},
		{"c's refusal is of a loop tick", func(in *Input) { in.Misfires[0].Tick = at(12) }},
		{"c's refusal is of a tick before 11", func(in *Input) { in.Misfires[0].Tick = at(10) }},
		{"c still live", func(in *Input) { in.Terms[1].Stop, in.Terms[1].Lost = time.Time{}, time.Time{} }},
		{"c ran a run of j", func(in *Input) {
			in.Starts = append(in.Starts, Start{Job: "j", Tick: at(12), Token: 15, Instance: "c", At: at(11.95), CatchUp: true, CatchUpFrom: at(12), Line: 90})
		}},
	} {
		in := stale()
		c.edit(&in)
		if r := Check(in); !lostAt(r, 11) {
			t.Errorf("%s: tick 11 not reported lost: %v", c.name, r.Violations)
		}
	}
}

// c asked its catch-up's claim of 11 again (the answer lost as the API
// server restarted), was refused as stale, and ended; b read 11 as the
// last claim: c's claim had landed, and 11 is lost at most once (the
// kube soak, lane 2, terms 129 and 130).
func TestCheck_UnknownCatchUpClaimLanded(t *testing.T) {
	base := func() Input {
		in := stale()
		in.Asked = []Misfire{{Instance: "c", Token: 15, Job: "j", Tick: at(11), At: at(11.6)}}
		in.LastClaims[0].Tick = at(11)
		in.Starts[10].CatchUpFrom = at(12)
		return in
	}
	if r := Check(base()); !r.OK() {
		t.Fatalf("c's claim of 11 landed, b read it: %v", r.Violations)
	}
	for _, c := range []struct {
		name string
		edit func(in *Input)
	}{
		{"c never asked again", func(in *Input) { in.Asked = nil }},
		{"b read 10", func(in *Input) { in.LastClaims[0].Tick = at(10) }},
		{"c asked for a loop tick", func(in *Input) { in.Asked[0].Tick = at(12) }},
		{"c asked for a tick before 11", func(in *Input) { in.Asked[0].Tick = at(10) }},
	} {
		in := base()
		c.edit(&in)
		if r := Check(in); !lostAt(r, 11) {
			t.Errorf("%s: tick 11 not reported lost: %v", c.name, r.Violations)
		}
	}
}
