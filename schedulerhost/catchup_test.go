package schedulerhost_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// misfireCases are the misfire policies the catch-up tests run under,
// each with its bound on catch-up runs (0: the default).
var misfireCases = []struct {
	policy   schedulerhost.Misfire
	maxCatch int
}{
	{schedulerhost.MisfireSkip, 0},
	{schedulerhost.MisfireRunOnce, 0},
	{schedulerhost.MisfireRunAll, 0},
	{schedulerhost.MisfireRunAll, 2},
}

// crashHandover starts node "a" with cfgA and node "b" with cfgB on a
// new memory store with timing, lets lead of fake time pass, then cuts a
// off the store (a crash: no renewal, no release reaches it) and lets gap
// pass while b takes over. stop heals a's path and stops both nodes.
func crashHandover(t *testing.T, timing election.Timing, cfgA, cfgB schedulerhost.Config, lead, gap time.Duration) (stop func()) {
	t.Helper()
	m := memory.New(timing)
	a := startNode(t, m, "a", cfgA)
	b := startNode(t, m, "b", cfgB)
	time.Sleep(lead)
	a.backend.Cut()
	time.Sleep(gap)
	return func() {
		a.backend.Heal()
		b.stop(t)
		a.stop(t)
	}
}

func TestHost_CatchUpAfterCrash(t *testing.T) {
	for _, tc := range misfireCases {
		t.Run(string(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec record
				cfg := func(name string) schedulerhost.Config {
					return schedulerhost.Config{Jobs: []schedulerhost.Job{{
						Name: "tick", Schedule: "@every 1s", Misfire: tc.policy,
						MisfireGrace: 30 * time.Second, MaxCatchUp: tc.maxCatch,
						Run: rec.job(name),
					}}}
				}
				// A wide safety margin leaves a gap of about 5 ticks between
				// the crashed leader's last tick and the next leader's first.
				timing := election.Timing{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: 5 * time.Second}
				stop := crashHandover(t, timing, cfg("a"), cfg("b"), 5500*time.Millisecond, 20*time.Second)
				runs, by, _ := rec.snapshot()
				seen := map[time.Time]string{}
				var lastA time.Time
				var catchUps []schedulerhost.Tick
				firstB := -1
				for i, r := range runs {
					if prev, dup := seen[r.Time]; dup {
						t.Errorf("tick %v run twice (by %s and %s)", r.Time, prev, by[i])
					}
					seen[r.Time] = by[i]
					if by[i] == "a" && r.Time.After(lastA) {
						lastA = r.Time
					}
					if r.CatchUp {
						catchUps = append(catchUps, r)
					}
					if by[i] == "b" && firstB < 0 {
						firstB = i
					}
				}
				if firstB < 0 {
					t.Fatal("b never ran anything")
				}
				var regularB time.Time
				for i := firstB; i < len(runs); i++ {
					if !runs[i].CatchUp {
						regularB = runs[i].Time
						break
					}
				}
				missed := int(regularB.Sub(lastA)/time.Second) - 1
				if missed < 2 {
					t.Fatalf("gap too small to test: a's last tick %v, b's first regular %v", lastA, regularB)
				}
				want := 0
				switch tc.policy {
				case schedulerhost.MisfireRunOnce:
					want = 1
				case schedulerhost.MisfireRunAll:
					want = missed
					if tc.maxCatch > 0 {
						want = min(missed, tc.maxCatch)
					}
				}
				t.Logf("%s: a's last tick +%v, b's first regular tick +%v, missed %d, catch-up runs %d",
					tc.policy, lastA.Sub(runs[0].Time), regularB.Sub(runs[0].Time), missed, len(catchUps))
				if len(catchUps) != want {
					t.Fatalf("catch-up runs = %d (%v), want %d", len(catchUps), catchUps, want)
				}
				// Catch-up runs are the newest missed ticks, oldest first.
				// A run-once run stands for every missed tick from the first
				// after a's last (Tick.CatchUpFrom); a run-all run for its own.
				for i, c := range catchUps {
					if wantT := regularB.Add(-time.Duration(len(catchUps)-i) * time.Second); !c.Time.Equal(wantT) {
						t.Errorf("catch-up %d has tick %v, want %v", i, c.Time, wantT)
					}
					from := c.Time
					if tc.policy == schedulerhost.MisfireRunOnce {
						from = lastA.Add(time.Second)
					}
					if !c.CatchUpFrom.Equal(from) {
						t.Errorf("catch-up %d (tick %v) stands for the ticks from %v, want from %v", i, c.Time, c.CatchUpFrom, from)
					}
				}
				for i, r := range runs {
					if !r.CatchUp && !r.CatchUpFrom.IsZero() {
						t.Errorf("run %d (tick %v, not a catch-up) has CatchUpFrom %v", i, r.Time, r.CatchUpFrom)
					}
				}
				stop()
			})
		})
	}
}

func TestHost_CatchUpRespectsGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: 5 * time.Second})
		var rec record
		cfg := schedulerhost.Config{Jobs: []schedulerhost.Job{{
			Name: "tick", Schedule: "@every 1s", Misfire: schedulerhost.MisfireRunAll,
			MisfireGrace: 2 * time.Second, Run: rec.job("x"),
		}}}
		a := startNode(t, m, "a", cfg)
		time.Sleep(3500 * time.Millisecond)
		a.backend.Cut()
		b := startNode(t, m, "b", cfg)
		time.Sleep(20 * time.Second)
		term, ok := b.elector.Term()
		if !ok {
			t.Fatal("b does not lead")
		}
		runs, _, _ := rec.snapshot()
		var lastA time.Time
		var got []time.Time
		for _, r := range runs {
			if r.CatchUp {
				got = append(got, r.Time)
			} else if r.Time.Before(term.Since) {
				lastA = r.Time
			}
		}
		var want []time.Time
		for tk := lastA.Add(time.Second); !tk.After(term.Since); tk = tk.Add(time.Second) {
			if term.Since.Sub(tk) <= 2*time.Second {
				want = append(want, tk)
			}
		}
		t.Logf("b led at %v; a's last tick %v; catch-up ticks %v", term.Since, lastA, got)
		if len(want) < 2 || len(got) != len(want) {
			t.Fatalf("catch-up ticks = %v, want %v (those within 2s grace)", got, want)
		}
		for i := range want {
			if !got[i].Equal(want[i]) {
				t.Errorf("catch-up %d = %v, want %v", i, got[i], want[i])
			}
		}
		a.backend.Heal()
		b.stop(t)
		a.stop(t)
	})
}

// hungReads is a ledger whose LastClaimed waits until its context ends, as
// on a backend that does not answer.
type hungReads struct{ ledger.Ledger }

func (h hungReads) LastClaimed(ctx context.Context, jobs []string) ([]time.Time, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// leadOnHungReads leads term 7 with jobs on a ledger whose reads hang, for
// d of fake time, and returns the Host's JSON log. The store never granted
// token 7: a claim the schedule loop makes ends the term.
func leadOnHungReads(t *testing.T, d time.Duration, jobs ...schedulerhost.Job) *envtest.Buffer {
	t.Helper()
	return leadTerm7(t, hungReads{newMemory().Ledger()}, d, jobs...)
}

// leadTerm7 leads term 7 of a Host "a" with jobs on the ledger l for d of
// fake time, then ends the term (a step-down), and returns the Host's JSON
// log.
func leadTerm7(t *testing.T, l ledger.Ledger, d time.Duration, jobs ...schedulerhost.Job) *envtest.Buffer {
	t.Helper()
	logs := new(envtest.Buffer)
	h, err := schedulerhost.New(schedulerhost.Config{
		Ledger: l, Instance: "a",
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Jobs: jobs,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Lead(ctx, election.NewTerm(context.Background(), 7)) }()
	time.Sleep(d)
	cancel()
	<-done
	return logs
}

// logLines returns the records of logs whose msg is msg, decoded.
func logLines(t *testing.T, logs *envtest.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ln := range strings.Split(logs.String(), "\n") {
		if ln == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Fatalf("log line %q: %v", ln, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

const (
	msgNotFired = "ticks not fired: the term ended before its schedule loop began"
	msgLoopLate = "schedule loop began late: the ticks since the term began fire now"
)

func nop(context.Context) error { return nil }

// A term that ends while its catch-up still waits on the ledger never
// begins its schedule loop: the ticks since its start were not fired, and
// it says so for each job, with how many.
func TestHost_TermOverBeforeTheLoopSaysWhichTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := leadOnHungReads(t, 3500*time.Millisecond,
			schedulerhost.Job{Name: "a", Schedule: "@every 1s", Run: nop},
			schedulerhost.Job{Name: "b", Schedule: "@every 2s", Run: nop})
		got := map[string]float64{}
		for _, l := range logLines(t, logs, msgNotFired) {
			got[l["job"].(string)] = l["ticks"].(float64)
		}
		if got["a"] != 3 || got["b"] != 1 || len(got) != 2 {
			t.Errorf("ticks not fired, by job: %v; want a: 3 (1 s, 2 s, 3 s), b: 1 (2 s)", got)
		}
		if l := logLines(t, logs, msgLoopLate); len(l) != 0 {
			t.Errorf("the loop never began, but a line says it began late: %v", l)
		}
	})
}

// A catch-up that waits on the ledger past a second holds the loop back;
// the loop then says how late it began.
func TestHost_LateLoopSaysHowLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := leadOnHungReads(t, 6*time.Second, schedulerhost.Job{Name: "a", Schedule: "@every 1s", Run: nop})
		l := logLines(t, logs, msgLoopLate)
		if len(l) != 1 || l[0]["late"] != float64(5*time.Second) {
			t.Errorf("late-loop lines %v: want one, late 5s (the read's timeout)", l)
		}
		if n := len(logLines(t, logs, msgNotFired)); n != 0 {
			t.Errorf("%d not-fired lines, want none: the loop began", n)
		}
	})
}
