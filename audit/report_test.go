package audit

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

func compute(t *testing.T, in Input) Report {
	t.Helper()
	if in.Schedules == nil {
		in.Schedules = schedules
	}
	rep, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, in, rep)
	return rep
}

// checkReport fails t unless rep adds up: Due is the sum of Classes and
// Folded, Counts sum to Classes, and each NotOK range is in the window,
// not ok, and counts its ticks.
func checkReport(t *testing.T, in Input, rep Report) {
	t.Helper()
	sum := rep.Folded
	for _, n := range rep.Classes {
		sum += n
	}
	if sum != rep.Due {
		t.Errorf("Due %d, want the sum of Classes %v and Folded %d: %d", rep.Due, rep.Classes, rep.Folded, sum)
	}
	byClass := map[Class]int64{}
	for _, c := range rep.Counts {
		byClass[c.Class] += c.Ticks
	}
	for _, c := range Classes {
		if byClass[c] != rep.Classes[c] {
			t.Errorf("Counts of %s sum to %d, Classes says %d", c, byClass[c], rep.Classes[c])
		}
	}
	next := dueNext(t, in)
	for i, r := range rep.NotOK {
		if r.Class == Ran && r.Reason == ReasonOK {
			t.Errorf("NotOK[%d] ran ok", i)
		}
		if !r.First.After(in.From) || r.Last.After(in.To) {
			t.Errorf("NotOK[%d] %s..%s is not in the window", i, rel(r.First), rel(r.Last))
		}
		if n := ticks(next, r.First, r.Last); n != r.Count {
			t.Errorf("NotOK[%d] %s..%s: Count %d, want its %d ticks", i, rel(r.First), rel(r.Last), r.Count, n)
		}
	}
}

// dueNext is the Next of in's account under the spec in force at each
// tick.
func dueNext(t *testing.T, in Input) Next {
	t.Helper()
	specs := in.Account.Specs
	nexts := make([]Next, len(specs))
	for i, s := range specs {
		n, err := schedules(s)
		if err != nil {
			t.Fatal(err)
		}
		nexts[i] = n
	}
	return func(c time.Time) time.Time {
		for i := range specs {
			if i+1 < len(specs) && !c.Before(specs[i+1].At.Add(-time.Nanosecond)) {
				continue
			}
			n := nexts[i](laterOf(c, specs[i].At.Add(-time.Nanosecond)))
			if i+1 < len(specs) && !n.Before(specs[i+1].At) {
				continue // the next spec's first tick comes first
			}
			return n
		}
		return time.Time{}
	}
}

// notOK is rep.NotOK in short.
func notOK(rep Report) string {
	var b strings.Builder
	for _, r := range rep.NotOK {
		fmt.Fprintf(&b, "%s/%s %s-%s (%d) ", r.Class, r.Reason, rel(r.First), rel(r.Last), r.Count)
	}
	return strings.TrimSpace(b.String())
}

func every10s() Account {
	return Account{Job: "j", Specs: []Spec{{At: t0, Schedule: "@every 10s"}}}
}

// calls counts the Next calls of the schedules it makes.
func counted(calls *int) Schedules {
	return func(s Spec) (Next, error) {
		n, err := schedules(s)
		if err != nil {
			return nil, err
		}
		return func(t time.Time) time.Time { *calls++; return n(t) }, nil
	}
}

func TestComputeAllOKInOneRange(t *testing.T) {
	next := every(10 * time.Second)
	a := every10s()
	a.Add(span(next, Ran, ReasonOK, sec(10), sec(600)), next)
	calls := 0
	in := Input{Account: a, From: t0, To: sec(600), Schedules: counted(&calls)}
	rep := compute(t, in)
	if rep.Due != 60 || rep.Classes[Ran] != 60 || len(rep.Classes) != 1 || len(rep.NotOK) != 0 || rep.Folded != 0 {
		t.Errorf("report: due %d, classes %v, not ok %q, folded %d; want 60 due, all ran, none not ok", rep.Due, rep.Classes, notOK(rep), rep.Folded)
	}
	if want := []Count{{Ran, ReasonOK, 60}}; !reflect.DeepEqual(rep.Counts, want) {
		t.Errorf("Counts = %v, want %v", rep.Counts, want)
	}
	if !rep.LastOK.Equal(sec(600)) {
		t.Errorf("LastOK = %s, want 600", rel(rep.LastOK))
	}
	// The range is counted whole, without a walk of its 60 ticks.
	if calls > 3 {
		t.Errorf("%d calls of Next for a window holding one range, want at most 3", calls)
	}
}

func TestComputeWindowCutsARange(t *testing.T) {
	next := every(10 * time.Second)
	a := every10s()
	a.Add(span(next, Ran, ReasonOK, sec(10), sec(600)), next)
	fail := span(next, Ran, ReasonFailed, sec(610), sec(650))
	fail.Token, fail.Error = 4, "exit status 2"
	a.Add(fail, next)
	// Both ends of the window inside the ok range: ticks 110..300.
	rep := compute(t, Input{Account: a, From: sec(100), To: sec(305)})
	if rep.Due != 20 || rep.Classes[Ran] != 20 || len(rep.NotOK) != 0 {
		t.Errorf("window (100, 305]: due %d, classes %v, not ok %q; want 20 ran ok", rep.Due, rep.Classes, notOK(rep))
	}
	if !rep.LastOK.Equal(sec(300)) {
		t.Errorf("window (100, 305]: LastOK = %s, want 300, the last ok tick in it", rel(rep.LastOK))
	}
	// From inside the ok range to inside the failed one: 110..600 ok,
	// 610..630 failed.
	rep = compute(t, Input{Account: a, From: sec(100), To: sec(630)})
	want := map[Class]int64{Ran: 53}
	if rep.Due != 53 || !reflect.DeepEqual(rep.Classes, want) {
		t.Errorf("window (100, 630]: due %d, classes %v; want 53, %v", rep.Due, rep.Classes, want)
	}
	if want := []Count{{Ran, ReasonFailed, 3}, {Ran, ReasonOK, 50}}; !reflect.DeepEqual(rep.Counts, want) {
		t.Errorf("Counts = %v, want %v", rep.Counts, want)
	}
	if got, want := notOK(rep), "ran/failed 610-630 (3)"; got != want {
		t.Errorf("NotOK = %s, want %s", got, want)
	}
	if r := rep.NotOK[0]; r.Token != 4 || r.Error != "exit status 2" {
		t.Errorf("NotOK[0] = %+v, want the range's token and error", r)
	}
	if !rep.LastOK.Equal(sec(600)) {
		t.Errorf("LastOK = %s, want 600", rel(rep.LastOK))
	}
}

func TestComputeHistoryAfterTheLastRange(t *testing.T) {
	next := every(10 * time.Second)
	a := every10s()
	a.Add(span(next, Ran, ReasonOK, sec(10), sec(100)), next)
	run := func(k int, res ledger.Result, err string) ledger.Run {
		return ledger.Run{Job: "j", Tick: sec(k), Instance: "b", Token: 9, Started: sec(k).Add(300 * time.Millisecond), Result: res, Error: err, Attempts: 1}
	}
	manual := run(150, ledger.ResultOK, "")
	manual.RequestID, manual.By, manual.Tick = "req-1", "alice", sec(151)
	hist := []ledger.Run{
		run(160, ledger.ResultCancelled, ErrTextClaimedNotStarted+": term ended"),
		run(110, ledger.ResultOK, ""),
		run(120, ledger.ResultFailed, "exit status 1"),
		run(130, ledger.ResultUnknown, "term 9 ended"),
		run(140, ledger.ResultRunning, ""),
		manual,
	}
	rep := compute(t, Input{Account: a, History: hist, From: t0, To: sec(200)})
	want := map[Class]int64{Ran: 12, Lost: 2, Pending: 1, Missed: 5}
	if rep.Due != 20 || !reflect.DeepEqual(rep.Classes, want) {
		t.Errorf("due %d, classes %v; want 20, %v", rep.Due, rep.Classes, want)
	}
	wantNotOK := "ran/failed 120-120 (1) lost/outcome-unknown 130-130 (1) pending/running 140-140 (1) missed/unaccounted 150-150 (1) lost/term-ended 160-160 (1) missed/unaccounted 170-200 (4)"
	if got := notOK(rep); got != wantNotOK {
		t.Errorf("NotOK:\n got %s\nwant %s", got, wantNotOK)
	}
	if r := rep.NotOK[0]; r.Token != 9 || r.Instance != "b" || r.Late != 300*time.Millisecond || r.Attempts != 1 || r.Error != "exit status 1" {
		t.Errorf("the failed tick from the history: %+v, want its token, instance, lateness, attempts and error", r)
	}
	if !rep.LastOK.Equal(sec(110)) {
		t.Errorf("LastOK = %s, want 110 (the run-now run is no tick)", rel(rep.LastOK))
	}
	if len(rep.Manual) != 1 || rep.Manual[0].RequestID != "req-1" {
		t.Errorf("Manual = %+v, want the run-now run req-1", rep.Manual)
	}
	outside := manual
	outside.Tick = sec(250)
	if rep := compute(t, Input{Account: a, History: []ledger.Run{outside}, From: t0, To: sec(200)}); len(rep.Manual) != 0 {
		t.Errorf("Manual = %+v, want none: the run-now run is after the window", rep.Manual)
	}
}

func TestComputeLag(t *testing.T) {
	next := every(10 * time.Second)
	a := every10s()
	a.Add(span(next, Ran, ReasonOK, sec(10), sec(100)), next)
	rep := compute(t, Input{Account: a, From: t0, To: sec(200), Lag: 30 * time.Second})
	if got, want := notOK(rep), "missed/unaccounted 110-170 (7) pending/not-written 180-200 (3)"; got != want {
		t.Errorf("NotOK:\n got %s\nwant %s", got, want)
	}
}

func TestComputeNobodyLed(t *testing.T) {
	next := every(10 * time.Second)
	a := every10s()
	a.Add(span(next, Ran, ReasonOK, sec(10), sec(100)), next)
	terms := []control.Term{ // newest first, as control.Jobs.Terms returns them
		{Token: 2, Instance: "b", Started: sec(155)},
		{Token: 1, Instance: "a", Started: t0.Add(-time.Hour), Ended: sec(120)},
	}
	rep := compute(t, Input{Account: a, Terms: terms, From: t0, To: sec(200)})
	if got, want := notOK(rep), "missed/unaccounted 110-110 (1) missed/no-leader 120-150 (4) missed/unaccounted 160-200 (5)"; got != want {
		t.Errorf("NotOK:\n got %s\nwant %s", got, want)
	}
	if len(rep.NotOK) == 3 {
		if r := rep.NotOK[1]; !r.NobodyFrom.Equal(sec(120)) || !r.NobodyUntil.Equal(sec(155)) {
			t.Errorf("nobody led from %s until %s, want 120 until 155", rel(r.NobodyFrom), rel(r.NobodyUntil))
		}
	}
	if want := []Count{{Ran, ReasonOK, 10}, {Missed, ReasonNoLeader, 4}, {Missed, ReasonUnaccounted, 6}}; !reflect.DeepEqual(rep.Counts, want) {
		t.Errorf("Counts = %v, want %v (classes in report order, reasons by name)", rep.Counts, want)
	}
	// Nobody leads after the last term ended: no end to the span.
	ended := []control.Term{{Token: 1, Started: t0.Add(-time.Hour), Ended: sec(175)}}
	rep = compute(t, Input{Account: a, Terms: ended, From: t0, To: sec(200)})
	if got, want := notOK(rep), "missed/unaccounted 110-170 (7) missed/no-leader 180-200 (3)"; got != want {
		t.Errorf("after the last term: NotOK %s, want %s", got, want)
	} else if r := rep.NotOK[1]; !r.NobodyFrom.Equal(sec(175)) || !r.NobodyUntil.IsZero() {
		t.Errorf("after the last term: nobody led from %s until %v, want 175 until zero", rel(r.NobodyFrom), r.NobodyUntil)
	}
	// Terms known only from after the ticks: who led then is unknown.
	late := []control.Term{{Token: 5, Instance: "c", Started: sec(155)}}
	rep = compute(t, Input{Account: a, Terms: late, From: t0, To: sec(200)})
	if got, want := notOK(rep), "missed/unaccounted 110-200 (10)"; got != want {
		t.Errorf("terms known from 155 only: NotOK %s, want %s", got, want)
	}
}

func TestComputeSpecChange(t *testing.T) {
	a := every10s()
	old, nw := every(10*time.Second), every(30*time.Second)
	a.SetSpec(Spec{At: sec(95), Schedule: "@every 30s"})
	a.Add(span(old, Ran, ReasonOK, sec(10), sec(90)), old)
	a.Add(span(nw, Ran, ReasonOK, sec(120), sec(120)), nw)
	a.Add(span(nw, Ran, ReasonOK, sec(180), sec(210)), nw) // 150 missing
	rep := compute(t, Input{Account: a, From: t0, To: sec(210)})
	// 10..90 under 10s (9), then 120..210 under 30s (4).
	if want := map[Class]int64{Ran: 12, Missed: 1}; rep.Due != 13 || !reflect.DeepEqual(rep.Classes, want) {
		t.Errorf("due %d, classes %v; want 13, %v", rep.Due, rep.Classes, want)
	}
	if got, want := notOK(rep), "missed/unaccounted 150-150 (1)"; got != want {
		t.Errorf("NotOK %s, want %s", got, want)
	}
	wantSpecs := []SpecChange{{At: t0, New: "@every 10s"}, {At: sec(95), Old: "@every 10s", New: "@every 30s"}}
	if !reflect.DeepEqual(rep.Specs, wantSpecs) {
		t.Errorf("Specs = %+v, want %+v", rep.Specs, wantSpecs)
	}
	// Due from the first spec's At on, that tick included, and not
	// before: a window from an hour before adds tick 0 only.
	rep = compute(t, Input{Account: a, From: t0.Add(-time.Hour), To: sec(210)})
	if got, want := notOK(rep), "missed/unaccounted 0-0 (1) missed/unaccounted 150-150 (1)"; rep.Due != 14 || got != want {
		t.Errorf("window from an hour before the first spec: due %d, NotOK %s; want 14, %s", rep.Due, got, want)
	}
}

// A real cron spec, and a change to it from @every.
func TestComputeCron(t *testing.T) {
	paris, _ := time.LoadLocation("Europe/Paris")
	a := Account{Job: "c", Specs: []Spec{{At: t0, Schedule: "@every 1m"}}}
	a.SetSpec(Spec{At: t0.Add(30*time.Minute + 30*time.Second), Schedule: "*/5 * * * *", Zone: "Europe/Paris"})
	in := Input{Account: a, From: t0, To: t0.Add(2 * time.Hour)}
	next := dueNext(t, in)
	a.Add(span(next, Ran, ReasonOK, t0.Add(time.Minute), t0.Add(time.Hour)), next)
	in.Account = a
	rep := compute(t, in)
	// 1..30 min every minute (30), 35..60 every 5 (6) ok; 65..120 (12) missed.
	if want := map[Class]int64{Ran: 36, Missed: 12}; rep.Due != 48 || !reflect.DeepEqual(rep.Classes, want) {
		t.Errorf("due %d, classes %v; want 48, %v", rep.Due, rep.Classes, want)
	}
	if len(rep.NotOK) != 1 || !rep.NotOK[0].First.Equal(t0.Add(65*time.Minute)) || rep.NotOK[0].Count != 12 {
		t.Errorf("NotOK = %s, want the 12 ticks from 65 min", notOK(rep))
	}
	if got := rep.NotOK[0].First.In(paris).Minute(); got != 5 {
		t.Errorf("first missed tick at minute %d, want 5", got)
	}
}

func TestComputeFolded(t *testing.T) {
	next := every(10 * time.Second)
	a := every10s()
	a.Add(span(next, Ran, ReasonOK, sec(10), sec(50)), next)
	fail := span(next, Ran, ReasonFailed, sec(60), sec(60))
	fail.Error = strings.Repeat("f", MaxError)
	a.Add(fail, next)
	a.Add(span(next, Ran, ReasonOK, sec(70), sec(100)), next)
	// Fold the first two ranges as Fit does.
	a.Folded, a.FoldedThrough, a.Ranges = map[Class]int64{Ran: 6}, sec(60), a.Ranges[2:]
	rep := compute(t, Input{Account: a, From: t0, To: sec(100)})
	if rep.Due != 10 || rep.Folded != 6 || rep.Classes[Ran] != 4 || !rep.FoldedThrough.Equal(sec(60)) {
		t.Errorf("due %d, folded %d through %s, classes %v; want 10 due, 6 folded through 60, 4 ran", rep.Due, rep.Folded, rel(rep.FoldedThrough), rep.Classes)
	}
	if rep := compute(t, Input{Account: a, From: sec(30), To: sec(100)}); rep.Due != 7 || rep.Folded != 3 {
		t.Errorf("window from 30: due %d, folded %d; want 7, 3", rep.Due, rep.Folded)
	}
	if rep := compute(t, Input{Account: a, From: sec(60), To: sec(100)}); rep.Due != 4 || rep.Folded != 0 {
		t.Errorf("window after FoldedThrough: due %d, folded %d; want 4, 0", rep.Due, rep.Folded)
	}
}

func TestComputeNotOKJoins(t *testing.T) {
	next := every(10 * time.Second)
	a := every10s()
	a.Add(span(next, Ran, ReasonOK, sec(10), sec(10)), next)
	boom := span(next, Ran, ReasonFailed, sec(70), sec(90))
	boom.Token, boom.Instance, boom.Error = 2, "b", "boom"
	a.Add(boom, next)
	run := func(k int, res ledger.Result, token uint64, err string) ledger.Run {
		return ledger.Run{Job: "j", Tick: sec(k), Instance: "b", Token: token, Result: res, Error: err}
	}
	hist := []ledger.Run{
		run(20, ledger.ResultFailed, 1, "boom"),
		run(30, ledger.ResultFailed, 1, "boom"),
		run(40, ledger.ResultOK, 1, ""),
		run(50, ledger.ResultFailed, 1, "boom"),
		run(60, ledger.ResultFailed, 2, "boom"),
		run(100, ledger.ResultFailed, 2, "boom"), // continues the range 70-90
		run(110, ledger.ResultFailed, 2, "other"),
	}
	rep := compute(t, Input{Account: a, History: hist, From: t0, To: sec(110)})
	want := "ran/failed 20-30 (2) ran/failed 50-50 (1) ran/failed 60-100 (5) ran/failed 110-110 (1)"
	if got := notOK(rep); got != want {
		t.Errorf("NotOK:\n got %s\nwant %s", got, want)
	}
}

func TestComputeBadSpec(t *testing.T) {
	a := Account{Job: "j", Specs: []Spec{{At: t0, Schedule: "not a schedule"}}}
	_, err := Compute(Input{Account: a, From: t0, To: sec(60), Schedules: schedules})
	if err == nil || !strings.Contains(err.Error(), `"not a schedule"`) || !strings.Contains(err.Error(), "j") {
		t.Errorf("Compute with a bad spec: %v, want an error naming the job and the spec", err)
	}
}

// Ticks missed in two spans in which nobody led, one after the other,
// are listed apart, each with its span.
func TestComputeNotOKKeepsEachNobodyLedSpan(t *testing.T) {
	next := every(10 * time.Second)
	a := every10s()
	a.Add(span(next, Ran, ReasonOK, sec(10), sec(100)), next)
	terms := []control.Term{
		{Token: 3, Started: sec(145)},
		{Token: 2, Started: sec(125), Ended: sec(128)}, // between ticks 120 and 130
		{Token: 1, Started: t0.Add(-time.Hour), Ended: sec(115)},
	}
	rep := compute(t, Input{Account: a, Terms: terms, From: t0, To: sec(200)})
	want := "missed/unaccounted 110-110 (1) missed/no-leader 120-120 (1) missed/no-leader 130-140 (2) missed/unaccounted 150-200 (6)"
	if got := notOK(rep); got != want {
		t.Fatalf("NotOK:\n got %s\nwant %s", got, want)
	}
	for _, w := range []struct{ i, from, until int }{{1, 115, 125}, {2, 128, 145}} {
		if r := rep.NotOK[w.i]; !r.NobodyFrom.Equal(sec(w.from)) || !r.NobodyUntil.Equal(sec(w.until)) {
			t.Errorf("NotOK[%d]: nobody led from %s until %s, want %d until %d", w.i, rel(r.NobodyFrom), rel(r.NobodyUntil), w.from, w.until)
		}
	}
}
