package schedulerhost_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// lateAnswerLedger answers the first claim of the first tick it sees
// with an unknown outcome just before the claim's time runs out, and
// never answers the claims of that tick after it (a backend that hangs).
type lateAnswerLedger struct {
	ledger.Ledger
	firstTick
	attempts int
}

// firstTick remembers the first tick a ledger was asked to claim.
type firstTick struct {
	mu    sync.Mutex
	first time.Time
}

// isLocked reports whether tick is the first one seen (and sees it),
// with f.mu held.
func (f *firstTick) isLocked(tick time.Time) bool {
	if f.first.IsZero() {
		f.first = tick
	}
	return tick.Equal(f.first)
}

// tick returns the first tick seen.
func (f *firstTick) tick() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

func (l *lateAnswerLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	return eachClaim(ctx, cs, func(ctx context.Context, c ledger.Claim) error {
		l.mu.Lock()
		mine := l.isLocked(c.Tick)
		if mine {
			l.attempts++
		}
		n := l.attempts
		l.mu.Unlock()
		switch {
		case !mine:
			return l.Ledger.Claim(ctx, []ledger.Claim{c})[0]
		case n == 1:
			time.Sleep(4800 * time.Millisecond)
			return errReset
		default:
			<-ctx.Done()
			return ctx.Err()
		}
	})
}

// A claim, its retries included, gives up within ledgerTimeout (5 s) of
// its start: a retry made just before the time runs out does not get a
// fresh 5 s. While the claim is in flight the job's next ticks are skipped
// as "previous run still going"; the history checker bounds that excuse
// by the claim timeout, so the ticks from 6 s after the first must run.
func TestHost_ClaimRetriesEndWithinTheClaimTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var st starts
		fl := &lateAnswerLedger{Ledger: m.Ledger()}
		n := startNode(t, m, "a", schedulerhost.Config{Ledger: fl, Jobs: []schedulerhost.Job{{
			Name: "t", Schedule: "@every 1s",
			Run: func(ctx context.Context) error { st.add(ctx); return nil },
		}}})
		time.Sleep(12500 * time.Millisecond)
		n.stop(t)
		first := fl.tick()
		st.mu.Lock()
		defer st.mu.Unlock()
		ran := map[time.Time]bool{}
		for _, tk := range st.ticks {
			ran[tk] = true
		}
		for s := 6; s <= 11; s++ {
			if tk := first.Add(time.Duration(s) * time.Second); !ran[tk] {
				t.Errorf("tick %v (%d s after the first, whose claim hung) did not run; ran: %v", tk.Format("15:04:05"), s, st.ticks)
			}
		}
	})
}
