package schedulerhost_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/schedulerhost"
)

// TestAccount_SkipWrittenAtOnce: a record the ledger does not back (an
// overlap skip) is written at once, not at the next interval: a term
// that dies before then does not take it along.
func TestAccount_SkipWrittenAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		time.Sleep(300 * time.Millisecond)
		slow := schedulerhost.Job{Name: "slow", Schedule: "@every 1s", Run: func(ctx context.Context) error {
			time.Sleep(10 * time.Second)
			return nil
		}}
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Jobs: []schedulerhost.Job{slow}})
		// The first run starts at +1 s; the tick of +2 s is skipped, as
		// is every one after it while the run goes on. The accounts are
		// opened at the term's start; the interval's first write is due
		// at +5.3 s.
		time.Sleep(2*time.Second + 500*time.Millisecond)
		synctest.Wait()
		if _, byClass := stored(t, m.Control(), "slow"); byClass[audit.Skipped] == 0 {
			t.Errorf("at +2.8 s the Account holds %v, want the skip of +2 s written at once", byClass)
		}
		n.stop(t)
	})
}
