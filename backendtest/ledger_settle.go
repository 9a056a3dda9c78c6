package backendtest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// settleLedger checks what a new term does with the runs an ended term
// left "running" (schedulerhost.Settle): on this backend it finds them
// by History and stores them as unknown, with no end and an error naming
// both terms, through Finish; it leaves the runs that ended and the runs
// of its own term alone.
func settleLedger(t *testing.T, newElection func(t *testing.T) LedgerElection) {
	t.Run("SettleRunsEarlierTermsLeftRunning", func(t *testing.T) {
		e := newElection(t)
		old := e.Lead(t)
		claim := func(job string, tick time.Time, tok uint64) {
			t.Helper()
			if err := claim1(t, e.Ledger, ledger.Claim{Job: job, Tick: tick, Token: tok, Instance: "node-a", Started: tick}); err != nil {
				t.Fatalf("Claim of %s at %v with token %d: %v", job, tick, tok, err)
			}
		}
		// "report": one run ended (ok), one the term never finished.
		claim("report", tick0, old)
		ended := ledger.Run{Job: "report", Tick: tick0, Instance: "node-a", Token: old, Started: tick0,
			Ended: tick0.Add(time.Second), Result: ledger.ResultOK}
		if err := finish1(t, e.Ledger, ended); err != nil {
			t.Fatal(err)
		}
		claim("report", tick0.Add(time.Minute), old)
		claim("mail", tick0, old)

		cur := e.Lead(t) // the next term
		if cur <= old {
			t.Fatalf("the next term's token %d is not above %d", cur, old)
		}
		claim("mail", tick0.Add(time.Minute), cur) // the new term's own run, going

		settled, err := schedulerhost.Settle(ctx(t), e.Ledger, []string{"report", "mail", "never"}, cur)
		if err != nil {
			t.Fatalf("Settle: %v", err)
		}
		if len(settled) != 2 {
			t.Errorf("Settle settled %+v, want the two runs of token %d left running", settled, old)
		}
		check := func(job string, tick time.Time, want ledger.Result) {
			t.Helper()
			for _, r := range history(t, e.Ledger, job, 10) {
				if !r.Tick.Equal(tick) {
					continue
				}
				if r.Result != want {
					t.Errorf("%s at %v (token %d): %s %q, want %s", job, tick, r.Token, r.Result, r.Error, want)
				}
				if want == ledger.ResultUnknown && (!r.Ended.IsZero() || !strings.Contains(r.Error, "token "+itoa(old)) ||
					!strings.Contains(r.Error, "token "+itoa(cur)) || r.Instance != "node-a" || !r.Started.Equal(tick)) {
					t.Errorf("settled %+v: want no end, its start and instance kept, an error naming tokens %d and %d", r, old, cur)
				}
				return
			}
			t.Errorf("%s at %v: not in the history", job, tick)
		}
		check("report", tick0, ledger.ResultOK)
		check("report", tick0.Add(time.Minute), ledger.ResultUnknown)
		check("mail", tick0, ledger.ResultUnknown)
		check("mail", tick0.Add(time.Minute), ledger.ResultRunning)

		// Settling again finds nothing left.
		if again, err := schedulerhost.Settle(ctx(t), e.Ledger, []string{"report", "mail"}, cur); err != nil || len(again) != 0 {
			t.Errorf("Settle again: %+v, %v; want nothing", again, err)
		}
	})
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
