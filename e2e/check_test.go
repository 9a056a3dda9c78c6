package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/e2e/internal/history"
)

// check assembles the history, runs the checker and returns the summary.
// It fails the test on any violation or liveness problem, printing the
// seed, the fault timeline, the offending lines and the artifacts.
func (sc *scenario) check(from, to time.Time) string {
	t, be := sc.t, sc.be
	f, err := os.Open(sc.runsPath)
	if err != nil {
		t.Fatalf("%s: run log: %v", be.name, err)
	}
	starts, err := history.ParseRunLog(f)
	if err != nil {
		t.Fatalf("%s: %v", be.name, err)
	}
	_, _ = f.Seek(0, 0)
	ends, err := history.ParseEnds(f)
	if err != nil {
		t.Fatalf("%s: %v", be.name, err)
	}
	_, _ = f.Seek(0, 0)
	records, err := history.ParseRecords(f)
	f.Close()
	if err != nil {
		t.Fatalf("%s: %v", be.name, err)
	}
	sc.mu.Lock()
	pauses := slices.Clone(sc.pauses)
	sc.mu.Unlock()
	in := history.Input{
		Starts:     starts,
		Ends:       ends,
		Records:    records,
		Heartbeats: heartbeats(),
		Pauses:     pauses,
		Jobs: map[string]history.Policy{
			"tick": {Every: time.Second, Misfire: "run-once", Grace: be.grace},
			"nap":  {Every: 5 * time.Second, Misfire: "run-once", Grace: be.grace},
		},
		From: from, To: to,
		HandoverBound: be.handoverBound,
		CrashBound:    be.crashBound,
		Slack:         slack,
		ClaimTimeout:  claimTimeout,
		PauseRead:     2 * claimTimeout, // a read, and one more after a slow one
		Frozen:        sc.frozen,
		Faults:        sc.timeline,
	}
	if sc.sidecar != nil {
		sc.sidecar.mu.Lock()
		in.Misfires = append(in.Misfires, sc.sidecar.appDown...)
		sc.sidecar.mu.Unlock()
	} else {
		in.Jobs["drain"] = history.Policy{Every: 3 * time.Second, Misfire: "run-once", Grace: be.grace}
		in.Jobs["session"] = history.Policy{Every: 4 * time.Second, Misfire: "run-once", Grace: be.grace}
		in.Jobs["interval"] = history.Policy{Every: intervalEvery, Epoch: true, Misfire: "run-once", Grace: be.grace}
	}
	switch {
	case sc.lane > 0:
		in.Excused = be.excused(be.crashBound)
	case be.faultWake > 0:
		in.Excused = be.excused(be.faultWake)
	}
	// Pauses of the whole machine, seen by the suite's own clocks: every
	// node was frozen, and a handover across one is not held to its bound.
	in.TTL = be.ttl
	in.ClockSteps = clocks.between(from.Add(-be.grace), to)
	for _, c := range in.ClockSteps {
		in.Excused = append(in.Excused, c)
		in.Faults = append(in.Faults, history.Fault{At: c.From, Kind: "machine paused", Target: "all", Detail: c.To.Sub(c.From).Round(time.Millisecond).String()})
	}
	catchUps, said := 0, 0 // catch-up runs, and those that recorded what they stand for
	for _, s := range starts {
		if s.CatchUp {
			catchUps++
			if !s.CatchUpFrom.IsZero() {
				said++
			}
		}
	}
	var maxLat time.Duration
	logged := map[runKey]time.Time{}
	ran := map[runKey]bool{}
	var unstarted []loggedRun // logged as started, with no start line
	for _, s := range starts {
		ran[runKey{s.Job, s.Tick.Unix(), s.Token}] = true
	}
	for _, p := range sc.procs {
		p.poll()
		in.Terms = append(in.Terms, p.terms()...)
		p.mu.Lock()
		in.Misfires = append(in.Misfires, p.misfires...)
		in.LastClaims = append(in.LastClaims, p.lastClaims...)
		in.Asked = append(in.Asked, p.asked...)
		in.Steps = append(in.Steps, p.steps...)
		in.NotFired = append(in.NotFired, p.notFired...)
		for k, v := range p.runLogged {
			logged[k] = v
			if !ran[k] {
				unstarted = append(unstarted, loggedRun{p.id, k, v})
			}
		}
		p.mu.Unlock()
	}
	// The Host claimed the tick and logged the run as started, and the
	// job wrote no line: its instance was stopped at that instant, before
	// the fork. The tick stays claimed (no leader runs it again), which is
	// what a kill -9 then does; a term lost in a freeze starts nothing on
	// waking. Accounted for, not lost.
	for _, u := range unstarted {
		m := history.Misfire{Instance: u.id, Token: u.k.token, Job: u.k.job, Tick: time.Unix(u.k.tick, 0).UTC(), At: u.at}
		if how := stoppedBeforeStart(&in, u, slack); how != "" {
			m.Reason = "run started, then its instance was " + how
			in.Misfires = append(in.Misfires, m)
		} else {
			in.Unwritten = append(in.Unwritten, m)
		}
	}
	for i, s := range starts {
		if at, ok := logged[runKey{s.Job, s.Tick.Unix(), s.Token}]; ok {
			maxLat = max(maxLat, s.At.Sub(at))
			starts[i].Logged = at
		}
	}
	in.Starts = starts
	sc.checkedJobs = in.Jobs
	r := history.Check(in)
	// The checker's whole input, to re-check or read a run later.
	hist, err := json.MarshalIndent(in, "", " ")
	if err != nil {
		t.Errorf("%s: history.json: %v", sc.label(), err)
	} else if err := os.WriteFile(filepath.Join(sc.dir, "history.json"), hist, 0o644); err != nil {
		t.Errorf("%s: history.json: %v", sc.label(), err)
	}

	runtime := time.Since(sc.started).Round(time.Second)
	faults := joinCounts(sc.counts, ", ")
	accounted := joinCounts(r.Accounted, "; ")
	if accounted == "" {
		accounted = "none"
	}
	name := sc.label()
	if be.name == "mysql" {
		name = strings.Replace(name, "mysql", "mysql (MariaDB)", 1)
	}
	sum := fmt.Sprintf(`  %s: runtime %v, %d nodes, TTL %v, seed %d
    faults: %s
    runs %d in %d terms; duplicates %d, overlaps %d, missed beyond policy %d, outside-term %d, token-order %d, drain %d, slow handovers %d
    from the jobs' own records (%d lines): term-overlaps %d, runs after an acknowledged pause %d (%d pauses), starts before their tick %d, catch-ups standing for claimed or later ticks %d (%d of %d catch-up runs recorded what they stand for)
    ticks not run, accounted for by the policy or a reason the leader logged: %s
    max crash failover %v (documented bound %v, beyond it %d), max graceful handover %v (bound %v), max start latency %v (slack %v)%s
`, name, runtime, be.nodes, be.ttl, sc.seed, faults, r.Runs, r.Terms, r.Duplicates, r.Overlaps, r.LostTicks, r.OutsideTerm,
		r.TokenOrder, r.Drains, r.SlowHandovers, len(records), r.TermOverlaps, r.AfterPause, len(pauses), r.EarlyStarts, r.CatchUpCovers, said, catchUps, accounted,
		r.MaxCrashFailover.Round(time.Millisecond), be.crashBound, r.SlowFailovers, r.MaxHandover.Round(time.Millisecond), be.handoverBound,
		maxLat.Round(time.Millisecond), slack, excusedNote(r.Excused, sc.lane, be.faultWake))
	t.Logf("summary:\n%s", sum)
	sc.outcome = &outcome{Backend: be.name, Topology: be.topology, Profile: sc.prof.name, Seed: sc.seed, Started: sc.started,
		Runtime: runtime, Nodes: be.nodes, TTL: be.ttl, Faults: maps.Clone(sc.counts), Report: r, Problems: slices.Clone(sc.problems),
		MaxStartLatency: maxLat, CrashBound: be.crashBound, HandoverBound: be.handoverBound, FaultWake: be.faultWake, Lanes: 1}
	if hist != nil {
		sc.outcome.Histories = [][]byte{hist}
	}

	if sc.counts[fKillLeader] > 0 && r.MaxCrashFailover == 0 && r.Excused == 0 {
		sc.problem("a leader was killed but no crash failover was measured")
	}
	if !r.OK() || len(sc.problems) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d violations, %d problems\nreplay: BATON_E2E=1 BATON_E2E_SEED=%d BATON_E2E_BACKENDS=%s BATON_E2E_PROFILE=%s go test -count=1 -v -run 'TestFaults' ./e2e\nartifacts: %s (runs.log, node-*.log, jobs.yaml)\n",
			sc.label(), len(r.Violations), len(sc.problems), sc.seed, be.name, sc.prof.name, sc.dir)
		// The violations first: a log cut short keeps its head.
		lines := readLines(sc.runsPath)
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "violation: %s\n", v)
			for _, n := range lineRefs(v.Detail) {
				if n >= 1 && n <= len(lines) {
					fmt.Fprintf(&b, "    runs.log:%d: %s\n", n, lines[n-1])
				}
			}
		}
		for _, p := range sc.problems {
			fmt.Fprintf(&b, "problem: %s\n", p)
		}
		b.WriteString("fault timeline:\n")
		for _, f := range sc.timeline {
			fmt.Fprintf(&b, "  %s %-20s %-10s %s\n", f.At.Format("15:04:05.000"), f.Kind, f.Target, f.Detail)
		}
		b.WriteString("terms:\n")
		terms := append([]history.Term(nil), in.Terms...)
		sort.Slice(terms, func(i, j int) bool { return terms[i].Start.Before(terms[j].Start) })
		for _, tm := range terms {
			fmt.Fprintf(&b, "  token %-8d %-10s start %s stop %s end %s graceful %v killed %v\n", tm.Token, tm.Instance,
				stamp(tm.Start), stamp(tm.Stop), stamp(tm.End), tm.Graceful, tm.Killed)
		}
		t.Error(b.String())
	}
	return sum
}

// excusedNote says how many handovers and failovers overlapped a backend
// fault (another lane's, or on Consul lane 1's own, or its wake), if any
// did.
func excusedNote(n, lane int, wake time.Duration) string {
	if n == 0 {
		return ""
	}
	what := "a backend fault of another lane"
	if lane == 0 {
		what = fmt.Sprintf("a backend fault or the %v after it", wake)
	}
	return fmt.Sprintf("\n    %d handovers and failovers overlapped %s: judged for safety, not timed", n, what)
}

// joinCounts formats m as "key n" items in the order of the keys, joined
// by sep; "" when m is empty.
func joinCounts(m map[string]int, sep string) string {
	items := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		items = append(items, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(items, sep)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000000")
}

func readLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Split(string(b), "\n")
}

// lineRefs finds "line N" references in a violation's detail.
func lineRefs(s string) []int {
	var out []int
	f := strings.Fields(strings.NewReplacer("(", " ", ")", " ", ",", " ", ":", " ").Replace(s))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "line" {
			var n int
			if _, err := fmt.Sscanf(f[i+1], "%d", &n); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// loggedRun is a run that instance id logged as started at at.
type loggedRun struct {
	id string
	k  runKey
	at time.Time
}

// stoppedBeforeStart says how the suite stopped run u's instance as the
// run began, before its job could write a line: "killed" if it was
// SIGKILLed within slack after the node's "run started"; "frozen" if it
// was SIGSTOPped within slack of that record, either side (the suite's
// own instant of the signal, not the note it writes after settling; the
// node stamps its record as the signal lands), in a freeze the run's
// term did not survive: the term stopped by the thaw (plus slack), or a
// later term had begun by then. A term that outlived the freeze starts
// the run on waking, and the job's records then show it. Either way the
// job wrote no line of the run before the stop. "" if none of this holds.
func stoppedBeforeStart(in *history.Input, u loggedRun, slack time.Duration) string {
	wrote := func(by time.Time) bool {
		for _, r := range in.Records {
			if r.Job == u.k.job && r.Tick.Unix() == u.k.tick && r.Token == u.k.token && r.At.Before(by) {
				return true
			}
		}
		return false
	}
	for _, f := range in.Faults {
		if f.Target == u.id && (f.Kind == fKillLeader || f.Kind == fKillFollower) &&
			!f.At.Before(u.at) && f.At.Sub(u.at) <= slack && !wrote(f.At) {
			return "killed"
		}
	}
	lost := func(wake time.Time) bool {
		for _, tm := range in.Terms {
			if tm.Token == u.k.token && tm.Instance == u.id && !tm.Stop.IsZero() && !tm.Stop.After(wake) {
				return true
			}
			if tm.Token > u.k.token && !tm.Start.IsZero() && !tm.Start.After(wake) {
				return true
			}
		}
		return false
	}
	for _, fr := range in.Frozen {
		if fr.Instance == u.id && (fr.From.Sub(u.at)).Abs() <= slack && lost(fr.To.Add(slack)) && !wrote(fr.To) {
			return "frozen"
		}
	}
	return ""
}

// The kube soak's case (lane 2, drain 11:29:42, token 466): the suite
// sent SIGSTOP at 42.734013, node-1-82 stamped "run started" at 42.736,
// the term was lost at the thaw (45.286975, SIGCONT sent 45.286985), and
// the job wrote no line. Each change below must not be excused.
func TestStoppedBeforeStart(t *testing.T) {
	ts := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, "2026-11-28T11:29:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tick := ts("42")
	u := loggedRun{"node-1-82", runKey{"drain", tick.Unix(), 466}, ts("42.736")}
	base := func() history.Input {
		return history.Input{
			Frozen: []history.Interval{{Instance: "node-1-82", From: ts("42.734012863"), To: ts("45.28698458")}},
			Terms: []history.Term{
				{Instance: "node-1-82", Token: 466, Start: ts("36.624760727"), Stop: ts("45.286974925")},
				{Instance: "node-1-82", Token: 467, Start: ts("45.357643514")},
			},
			Faults: []history.Fault{{At: ts("43.620017918"), Kind: fStopLeader, Target: "node-1-82"}},
		}
	}
	slack := 200 * time.Millisecond
	if in := base(); stoppedBeforeStart(&in, u, slack) != "frozen" {
		t.Fatalf("the soak's case: not excused")
	}
	for _, c := range []struct {
		name string
		edit func(in *history.Input)
	}{
		{"frozen 300 ms after the record", func(in *history.Input) { in.Frozen[0].From = ts("43.036") }},
		{"frozen 300 ms before the record", func(in *history.Input) { in.Frozen[0].From = ts("42.436") }},
		{"another instance frozen", func(in *history.Input) { in.Frozen[0].Instance = "node-2-68" }},
		{"the term outlived the freeze", func(in *history.Input) {
			in.Terms[0].Stop = ts("47.5")
			in.Terms[1].Start = ts("47.6")
		}},
		{"the term lost after the thaw's slack", func(in *history.Input) {
			in.Terms[0].Stop = ts("45.6")
			in.Terms[1].Start = ts("45.7")
		}},
		{"a line of the run before the thaw", func(in *history.Input) {
			in.Records = []history.Record{{Kind: "H", Job: "drain", Tick: tick, Token: 466, Instance: "node-1-82", At: ts("43.0")}}
		}},
		{"a kill 300 ms after the record", func(in *history.Input) {
			in.Frozen = nil
			in.Faults = append(in.Faults, history.Fault{At: ts("43.036"), Kind: fKillLeader, Target: "node-1-82"})
		}},
		{"a kill before the record", func(in *history.Input) {
			in.Frozen = nil
			in.Faults = append(in.Faults, history.Fault{At: ts("42.7"), Kind: fKillLeader, Target: "node-1-82"})
		}},
		{"a latency fault", func(in *history.Input) {
			in.Frozen = nil
			in.Faults = append(in.Faults, history.Fault{At: ts("42.8"), Kind: fLatency, Target: "node-1-82"})
		}},
	} {
		in := base()
		c.edit(&in)
		if got := stoppedBeforeStart(&in, u, slack); got != "" {
			t.Errorf("%s: excused as %q", c.name, got)
		}
	}
	in := base()
	in.Frozen = nil
	in.Faults = append(in.Faults, history.Fault{At: ts("42.9"), Kind: fKillFollower, Target: "node-1-82"})
	if got := stoppedBeforeStart(&in, u, slack); got != "killed" {
		t.Errorf("killed 164 ms after the record: %q", got)
	}
	in.Records = []history.Record{{Kind: "S", Job: "drain", Tick: tick, Token: 466, Instance: "node-1-82", At: ts("42.8")}}
	if got := stoppedBeforeStart(&in, u, slack); got != "" {
		t.Errorf("killed after the job's first line: excused as %q", got)
	}
}
