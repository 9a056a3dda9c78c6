package e2e

import (
	"encoding/json"
	"os"
	"testing"

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
	b, err := readHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	var in history.Input
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	r := history.Check(in)
	t.Logf("runs %d terms %d duplicates %d overlaps %d lost %d outside-term %d token-order %d drain %d slow handovers %d slow failovers %d early starts %d catch-up covers %d term overlaps %d; accounted %v; max crash failover %v, max handover %v",
		r.Runs, r.Terms, r.Duplicates, r.Overlaps, r.LostTicks, r.OutsideTerm, r.TokenOrder, r.Drains, r.SlowHandovers, r.SlowFailovers, r.EarlyStarts, r.CatchUpCovers, r.TermOverlaps, r.Accounted, r.MaxCrashFailover, r.MaxHandover)
	for _, v := range r.Violations {
		t.Errorf("violation: %s", v)
	}
}
