package schedulerhost_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// slowClaims is a ledger of one claim a batch whose claims of job slow
// take delay to be answered while on.
type slowClaims struct {
	ledger.Ledger
	slow  string
	on    atomic.Bool
	delay time.Duration
}

func (l *slowClaims) MaxBatch() int { return 1 }

func (l *slowClaims) Claim(ctx context.Context, cs []ledger.Claim) []error {
	if l.on.Load() && cs[0].Job == l.slow {
		time.Sleep(l.delay)
	}
	return l.Ledger.Claim(ctx, cs)
}

// TestControl_PauseDuringASlowClaim: the runs of an instant share a read
// of the pauses, made once the first of them is claimed. A claim answered
// 900 ms after the others (a loaded backend) must not start its run on
// that read when a pause was acknowledged meanwhile: the run reads the
// pauses again.
func TestControl_PauseDuringASlowClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		l := &slowClaims{Ledger: m.Ledger(), slow: "j", delay: 900 * time.Millisecond}
		var rs ctlRuns
		n := startNode(t, m, "a", schedulerhost.Config{Control: m.Control(), Ledger: l, ShutdownTimeout: time.Minute,
			Jobs: []schedulerhost.Job{rs.job("j"), rs.job("other")}})
		start := time.Now()
		time.Sleep(2500 * time.Millisecond) // ticks of +1 s and +2 s ran
		l.on.Store(true)
		time.Sleep(time.Second) // +3.5 s: j's claim of +3 s is out; other's read the pauses
		if err := control.NewJobs(m.Control()).Pause(t.Context(), control.Pause{Job: "j", By: "alice", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		time.Sleep(2 * time.Second)
		n.stop(t)
		for _, r := range rs.of("j") {
			if r.at.After(acked) {
				t.Errorf("j's tick %v started at +%v, after the pause acknowledged at +%v", r.tick.Sub(start), r.at.Sub(start), acked.Sub(start))
			}
		}
		hist, err := n.host.History(t.Context(), "j", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) == 0 || hist[0].Result != ledger.ResultSkipped {
			t.Errorf("j's latest history entry %+v, want the tick of +3 s skipped", hist)
		}
	})
}
