package schedulerhost_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// hangFirst is a ledger whose claim of the first tick it sees waits until
// its context ends, as on a backend that does not answer.
type hangFirst struct {
	ledger.Ledger
	firstTick
}

func (l *hangFirst) Claim(ctx context.Context, cs []ledger.Claim) []error {
	return eachClaim(ctx, cs, func(ctx context.Context, c ledger.Claim) error {
		l.mu.Lock()
		mine := l.isLocked(c.Tick)
		l.mu.Unlock()
		if !mine {
			return l.Ledger.Claim(ctx, []ledger.Claim{c})[0]
		}
		<-ctx.Done()
		return ctx.Err()
	})
}

// A tick admitted while the claim of the job's run before it hangs waits
// for its turn; if the term stops meanwhile, it does not start, and it
// says so. It used to go unsaid: a soak (consul-cluster, lane 4, term
// 26206) found a tick that its live leader neither ran nor explained.
func TestHost_RunStoppedBeforeItsClaimSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := new(testenv.Buffer)
		fl := &hangFirst{Ledger: newMemory().Ledger()}
		h, err := schedulerhost.New(schedulerhost.Config{
			Ledger: fl, Instance: "a", Logger: slog.New(slog.NewJSONHandler(logs, nil)),
			Jobs: []schedulerhost.Job{{Name: "t", Schedule: "@every 1s", Overlap: schedulerhost.OverlapAllow, Run: nop}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Lead(ctx, election.NewTerm(context.Background(), 7)) }()
		time.Sleep(2500 * time.Millisecond) // ticks 1 (hung) and 2 (its turn after 1)
		cancel()                            // a step-down
		<-done
		said := map[string]bool{}
		for _, msg := range []string{"run not started: term stopping", "run not started: term over", "run not started: claim failed", "run started"} {
			for _, m := range logLines(t, logs, msg) {
				said[m["tick"].(string)] = true
			}
		}
		first := fl.tick()
		for s := 0; s < 2; s++ {
			tick := first.Add(time.Duration(s) * time.Second).Format(time.RFC3339Nano)
			if !said[tick] {
				t.Errorf("tick %s: admitted, not started, and not said why; said: %v", tick, said)
			}
		}
	})
}
