package schedulerhost_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// record is an independent log of runs, kept by the job itself: each
// run's tick, who ran it and its fencing token.
type record struct {
	mu     sync.Mutex
	runs   []schedulerhost.Tick
	by     []string
	tokens []uint64
}

// job returns a job function that records its runs as run by name (""
// where the test does not tell the nodes' runs apart).
func (r *record) job(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		tk, _ := schedulerhost.TickFromContext(ctx)
		tok, _ := election.TokenFromContext(ctx)
		r.mu.Lock()
		r.runs = append(r.runs, tk)
		r.by = append(r.by, name)
		r.tokens = append(r.tokens, tok)
		r.mu.Unlock()
		return nil
	}
}

// snapshot returns copies of what was recorded so far, in the order of
// the runs' starts.
func (r *record) snapshot() (runs []schedulerhost.Tick, by []string, tokens []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs), slices.Clone(r.by), slices.Clone(r.tokens)
}

// TestHost_EveryAcrossHandovers: two instances hand the lead over every
// 4 s; an @every 6s job, whose interval is longer than any term, runs at
// every whole multiple of 6 s since the Unix epoch, each once, whichever
// instance leads then.
func TestHost_EveryAcrossHandovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 6 * time.Second
		m := newMemory()
		var runs record
		cfg := schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "slow", Schedule: "@every 6s", Run: runs.job("")}}}
		start := time.Now()
		nodes := []*node{startNode(t, m, "a", cfg), startNode(t, m, "b", cfg)}
		// Hand over at odd seconds (5, 9, ..., 33), never at a tick: the
		// leader steps down, and its cooldown keeps it out of the next
		// election.
		terms := map[uint64]bool{}
		time.Sleep(time.Second)
		for range 9 {
			time.Sleep(4 * time.Second)
			for _, n := range nodes {
				if ti, ok := n.elector.Term(); ok {
					terms[ti.Token] = true
					n.elector.StepDown(3 * time.Second)
				}
			}
			synctest.Wait()
		}
		time.Sleep(4 * time.Second) // to start + 41 s
		for _, n := range nodes {
			if ti, ok := n.elector.Term(); ok {
				terms[ti.Token] = true
			}
		}
		end := time.Now()
		ticks, _, tokens := runs.snapshot()
		var got []time.Duration // since start
		for _, tk := range ticks {
			got = append(got, tk.Time.Sub(start))
		}
		t.Logf("%d terms in %v; %d runs, at +%v, by tokens %v", len(terms), end.Sub(start), len(ticks), got, tokens)
		if len(terms) < 9 {
			t.Fatalf("%d terms, want at least 9", len(terms))
		}
		var want []time.Duration
		for tk := start.Truncate(every).Add(every); !tk.After(end); tk = tk.Add(every) {
			want = append(want, tk.Sub(start))
		}
		for _, tk := range ticks {
			if tk.Time.UnixNano()%int64(every) != 0 {
				t.Errorf("tick %v: not a whole multiple of %v since the epoch", tk.Time, every)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("@every 6s ran %d times, at +%v, over %d terms; want %d, at +%v", len(got), got, len(terms), len(want), want)
		}
		for _, n := range nodes {
			n.stop(t)
		}
	})
}

// everyTicks lists the ticks of s after from, through to.
func everyTicks(t *testing.T, spec string, from, to time.Time) []time.Time {
	t.Helper()
	s, err := schedulerhost.ParseSchedule(spec)
	if err != nil {
		t.Fatal(err)
	}
	var ticks []time.Time
	for tk := s.Next(from); !tk.After(to); tk = s.Next(tk) {
		ticks = append(ticks, tk)
	}
	return ticks
}

// TestHost_EveryCatchUpOfEpochTicks: a leader crashes and the next takes
// over after a gap of several intervals; the ticks missed in between are
// the schedule's epoch ticks, and the job's misfire policy picks among
// them; the next leader's regular ticks are epoch ticks too.
func TestHost_EveryCatchUpOfEpochTicks(t *testing.T) {
	for _, spec := range []string{"@every 4s", "@every 3s offset 2s"} {
		for _, tc := range misfireCases {
			t.Run(fmt.Sprintf("%s/%s/%d", spec, tc.policy, tc.maxCatch), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { everyCatchUp(t, spec, tc.policy, tc.maxCatch) })
			})
		}
	}
}

func everyCatchUp(t *testing.T, spec string, policy schedulerhost.Misfire, maxCatch int) {
	// The crashed leader stops at its last renewal + TTL - margin; the
	// next takes the lease at that renewal + TTL: 8 s later.
	timing := election.Timing{TTL: 12 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: 8 * time.Second}
	var runs record
	cfg := schedulerhost.Config{Jobs: []schedulerhost.Job{{
		Name: "j", Schedule: spec, Misfire: policy, MisfireGrace: time.Minute, MaxCatchUp: maxCatch, Run: runs.job(""),
	}}}
	start := time.Now()
	stop := crashHandover(t, timing, cfg, cfg, 6500*time.Millisecond, 24*time.Second)
	end := time.Now()
	ticks, _, tokens := runs.snapshot()
	all := everyTicks(t, spec, start, end)
	var lastA, firstRegularB time.Time
	var catchUps []schedulerhost.Tick
	for i, tk := range ticks {
		if !slices.ContainsFunc(all, tk.Time.Equal) {
			t.Errorf("ran tick %v: not a tick of %q", tk.Time, spec)
		}
		switch {
		case tokens[i] == tokens[0]:
			lastA = tk.Time
		case tk.CatchUp:
			catchUps = append(catchUps, tk)
		case firstRegularB.IsZero():
			firstRegularB = tk.Time
		}
	}
	var missed []time.Time
	for _, tk := range all {
		if tk.After(lastA) && tk.Before(firstRegularB) {
			missed = append(missed, tk)
		}
	}
	t.Logf("%s %s: a's last tick +%v, b's first regular +%v, missed %d, catch-up runs %d",
		spec, policy, lastA.Sub(start), firstRegularB.Sub(start), len(missed), len(catchUps))
	if lastA.IsZero() || firstRegularB.IsZero() || len(missed) < 2 {
		t.Fatalf("gap too small to test: runs %v", ticks)
	}
	var want []time.Time // the catch-up runs' ticks
	switch policy {
	case schedulerhost.MisfireRunOnce:
		want = missed[len(missed)-1:]
	case schedulerhost.MisfireRunAll:
		want = missed[len(missed)-min(len(missed), cmp.Or(maxCatch, schedulerhost.DefaultMaxCatchUp)):]
	}
	var got []time.Time
	for _, c := range catchUps {
		got = append(got, c.Time)
		from := c.Time
		if policy == schedulerhost.MisfireRunOnce {
			from = missed[0]
		}
		if !c.CatchUpFrom.Equal(from) {
			t.Errorf("catch-up of %v stands for the ticks from %v, want from %v", c.Time, c.CatchUpFrom, from)
		}
	}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("catch-up runs at %v, want %v (missed: %v)", got, want, missed)
	}
	for i := 1; i < len(ticks); i++ {
		if !ticks[i].Time.After(ticks[i-1].Time) {
			t.Errorf("tick %v ran after %v", ticks[i].Time, ticks[i-1].Time)
		}
	}
	stop()
}

// TestHost_EveryReloadMovesThePhase: a reload that changes the interval
// or the offset moves the job onto the new schedule's epoch ticks from
// the reload on: the old schedule's ticks after it do not run, and the
// new one's before it are not caught up. An instance that starts later
// with another interval catches up the new schedule's ticks after the
// last claimed one, by the misfire policy.
func TestHost_EveryReloadMovesThePhase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var runs record
		job := func(spec string) []schedulerhost.Job {
			return []schedulerhost.Job{{Name: "j", Schedule: spec, Misfire: schedulerhost.MisfireRunAll, MisfireGrace: time.Minute, Run: runs.job("")}}
		}
		start := time.Now()
		at := func(d time.Duration) time.Time { return start.Add(d) }
		n := startNode(t, m, "a", schedulerhost.Config{Jobs: job("@every 4s")})
		time.Sleep(5500 * time.Millisecond) // ran 4
		if _, err := n.host.SetJobs(job("@every 6s offset 1s")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9 * time.Second) // to 14.5: ran 7, 13; not 8 or 12
		if _, err := n.host.SetJobs(job("@every 4s")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(7 * time.Second) // to 21.5: ran 16, 20; not 19
		n.stop(t)
		time.Sleep(10 * time.Second) // to 31.5: nobody leads
		n = startNode(t, m, "a", schedulerhost.Config{Jobs: job("@every 5s")})
		time.Sleep(4 * time.Second) // to 35.5: caught up 25, 30; ran 35
		n.stop(t)
		ticks, _, _ := runs.snapshot()
		var got, catchUps []time.Time
		for _, tk := range ticks {
			got = append(got, tk.Time)
			if tk.CatchUp {
				catchUps = append(catchUps, tk.Time)
			}
		}
		want := []time.Time{at(4 * time.Second), at(7 * time.Second), at(13 * time.Second), at(16 * time.Second),
			at(20 * time.Second), at(25 * time.Second), at(30 * time.Second), at(35 * time.Second)}
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("ran ticks %v, want %v", got, want)
		}
		if want := want[5:7]; !slices.EqualFunc(catchUps, want, time.Time.Equal) {
			t.Errorf("catch-up runs at %v, want %v", catchUps, want)
		}
	})
}
