package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/e2e/internal/history"
)

// TestRecheck runs the checker again over the history.json a scenario left
// in its artifacts directory (BATON_E2E_RECHECK=/tmp/baton-e2e-.../history.json),
// or over one a soak kept beside its report, gzipped
// (BATON_E2E_RECHECK=$PWD/docs/reliability/redis.lane1.json.gz, from the
// repository root: the test runs in e2e/).
func TestRecheck(t *testing.T) {
	path := os.Getenv("BATON_E2E_RECHECK")
	if path == "" {
		t.Skip("set BATON_E2E_RECHECK to a history.json to check it again")
	}
	r := history.Check(loadHistory(t, path))
	t.Logf("runs %d terms %d duplicates %d overlaps %d lost %d outside-term %d token-order %d drain %d slow handovers %d slow failovers %d early starts %d catch-up covers %d term overlaps %d; accounted %v; max crash failover %v, max handover %v",
		r.Runs, r.Terms, r.Duplicates, r.Overlaps, r.LostTicks, r.OutsideTerm, r.TokenOrder, r.Drains, r.SlowHandovers, r.SlowFailovers, r.EarlyStarts, r.CatchUpCovers, r.TermOverlaps, r.Accounted, r.MaxCrashFailover, r.MaxHandover)
	for _, v := range r.Violations {
		t.Errorf("violation: %s", v)
	}
}

// loadHistory reads the checker's input from a history.json, gzipped or
// not.
func loadHistory(t *testing.T, path string) history.Input {
	t.Helper()
	b, err := readHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	var in history.Input
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	if in.Heartbeats == nil {
		in.Heartbeats = heartbeats() // kept before the field: the same jobs
	}
	return in
}

// The second kube soak's last two lost ticks (lane 3) were the suite's
// stamp of a thaw, not baton: the suite took it after SIGCONT and its
// note, and each node logged its skip on waking 5 ms before it, so the
// rule for a run that ended while its instance was frozen (its end not
// yet reaped) did not apply. A frozen node logs nothing: its first line
// after the freeze began (past the slack, as a line may be stamped as
// the signal lands) bounds the thaw. With each thaw moved to that bound,
// as a stamp before the signal (scenario_test.go) gives at most, the
// history passes; as kept, it fails with exactly those two ticks. The
// history is that soak's, kept in testdata/ (docs/reliability/ holds the
// latest soak's).
func TestRecheck_ThawStampedAfterWaking(t *testing.T) {
	in := loadHistory(t, "testdata/kube-soak-2026-11-28-1329.lane3.json.gz")
	var lost []string
	for _, v := range history.Check(in).Violations {
		lost = append(lost, v.String())
	}
	want := []string{"tick 2026-11-28T13:36:02Z: term 57 (node-4m)", "tick 2026-11-28T13:44:31Z: term 122 (node-4-27)"}
	if len(lost) != len(want) || !strings.Contains(lost[0], want[0]) || !strings.Contains(lost[1], want[1]) {
		t.Fatalf("as kept: %q, want the two lost ticks %q", lost, want)
	}
	// In 13 of the lane's freezes a node logged before the stamp (by up
	// to 9 ms); only the two above changed what the checker could tell.
	moved := 0
	for i, f := range in.Frozen {
		first := f.To
		for _, m := range in.Misfires {
			if m.Instance == f.Instance && m.At.After(f.From.Add(in.Slack)) && m.At.Before(first) {
				first = m.At
			}
		}
		if first.Before(f.To) {
			in.Frozen[i].To = first
			moved++
		}
	}
	if moved != 13 {
		t.Errorf("%d thaws stamped after the node's first line, want 13", moved)
	}
	if r := history.Check(in); !r.OK() {
		t.Errorf("thaws bounded by the nodes' lines: %v", r.Violations)
	}
}

// The 60-minute etcd soak of 2026-11-28 20:00 (lane 1) timed two failovers
// as crashes, 6.41 s and 7.93 s against 4 s, though neither leader was
// killed while it led: each lost its lease while lane 1 restarted the etcd
// member, and the suite killed its node only later, as a follower, after
// the next term had begun. By the suite's record of the kills the history
// passes; without that record (each kill removed from the timeline) the
// two terms count as crashed again, and fail exactly as the soak did. The
// history is that soak's, kept in testdata/.
func TestRecheck_KilledAfterTheNextTermBegan(t *testing.T) {
	in := loadHistory(t, "testdata/etcd-soak-2026-11-28-2000.lane1.json.gz")
	r := history.Check(in)
	if !r.OK() || r.MaxCrashFailover > 4*time.Second {
		t.Fatalf("as kept: violations %v, max crash failover %v; want none, within 4s", r.Violations, r.MaxCrashFailover)
	}
	var faults []history.Fault
	for _, f := range in.Faults {
		if (f.Target == "node-4k" || f.Target == "node-4-37") && strings.HasPrefix(f.Kind, "kill-") {
			continue
		}
		faults = append(faults, f)
	}
	if len(faults) != len(in.Faults)-2 {
		t.Fatalf("removed %d kills of node-4k and node-4-37, want 2", len(in.Faults)-len(faults))
	}
	in.Faults = faults
	var slow []string
	for _, v := range history.Check(in).Violations {
		slow = append(slow, v.String())
	}
	want := []string{"node-4k was killed in term 3553", "node-4-37 was killed in term 13648"}
	if len(slow) != 2 || !strings.Contains(slow[0], want[0]) || !strings.Contains(slow[1], want[1]) {
		t.Fatalf("without the kills on record: %q, want the two slow failovers %q", slow, want)
	}
}
